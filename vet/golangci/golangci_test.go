package golangci_test

import (
	"testing"

	"github.com/golangci/plugin-module-register/register"

	_ "github.com/racesafe/racesafe/vet/golangci"
)

func TestPluginRegistersAndHonoursDisable(t *testing.T) {
	newPlugin, err := register.GetPlugin("racesafe")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(map[string]any{"disable": []string{"conflictretry"}})
	if err != nil {
		t.Fatal(err)
	}
	as, err := p.BuildAnalyzers()
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 4 {
		t.Fatalf("%d analyzers with one disabled, want 4", len(as))
	}
	for _, a := range as {
		if a.Name == "conflictretry" {
			t.Fatal("conflictretry runs although disabled")
		}
	}
	if p.GetLoadMode() != register.LoadModeTypesInfo {
		t.Errorf("load mode %q, want %q", p.GetLoadMode(), register.LoadModeTypesInfo)
	}
	if _, err := newPlugin(map[string]any{"disable": []string{"nosuch"}}); err == nil {
		t.Error("an unknown checker name was accepted")
	}
	if _, err := newPlugin(map[string]any{"unknown": 1}); err == nil {
		t.Error("an unknown setting was accepted")
	}
}
