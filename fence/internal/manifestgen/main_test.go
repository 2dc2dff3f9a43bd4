package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckedIn fails when fence/config/workitem.yaml is not what
// fence.Manifest builds: run go generate ./fence/.
func TestCheckedIn(t *testing.T) {
	want, err := build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../config/workitem.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("fence/config/workitem.yaml is stale, run go generate ./fence/ (-want +got):\n%s", diff)
	}
}
