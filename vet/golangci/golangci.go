// Package golangci is racesafe vet as a golangci-lint v2 module plugin:
// build a custom golangci-lint with it (golangci-lint custom, see
// docs/vet.md) and enable the linter "racesafe". Its settings pick
// checkers by name; with none, all run.
//
//	linters:
//	  enable: [racesafe]
//	  settings:
//	    custom:
//	      racesafe:
//	        type: module
//	        settings:
//	          disable: [conflictretry]
package golangci

import (
	"fmt"
	"slices"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet"
)

func init() { register.Plugin("racesafe", New) }

// Settings are the plugin's settings in .golangci.yml.
type Settings struct {
	// Disable names checkers not to run (regetwritten, silentdefault,
	// createfromlist, stalewriteback, conflictretry).
	Disable []string `json:"disable"`
}

// Plugin is the racesafe linter.
type Plugin struct{ settings Settings }

// New returns the plugin for golangci-lint's settings; an unknown setting
// or checker name is an error.
func New(settings any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](settings)
	if err != nil {
		return nil, fmt.Errorf("racesafe: %w", err)
	}
	for _, name := range s.Disable {
		if !slices.ContainsFunc(vet.Analyzers, func(a *analysis.Analyzer) bool { return a.Name == name }) {
			return nil, fmt.Errorf("racesafe: settings.disable: no checker named %q", name)
		}
	}
	return &Plugin{settings: s}, nil
}

// BuildAnalyzers returns the checkers not disabled.
func (p *Plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	var out []*analysis.Analyzer
	for _, a := range vet.Analyzers {
		if !slices.Contains(p.settings.Disable, a.Name) {
			out = append(out, a)
		}
	}
	return out, nil
}

// GetLoadMode says the checkers need type information.
func (p *Plugin) GetLoadMode() string { return register.LoadModeTypesInfo }
