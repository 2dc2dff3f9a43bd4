package vet_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/racesafe/racesafe/vet"
)

// TestRepository runs every checker over the racesafe module, tests
// included: it must report the incident's re-reads (regetwritten) and its
// silent phase default (silentdefault) and the children's create from a
// cached List (createfromlist) in examples/workitem/naive, and nothing in
// the library, the drop-in port or the full port.
func TestRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and analyses the whole module")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.LoadAllSyntax, Dir: root, Tests: true}, "./...")
	if err != nil {
		t.Fatal(err)
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		t.Fatalf("%d errors loading the module", n)
	}
	graph, err := checker.Analyze(vet.Analyzers, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	got := map[string]int{} // "file analyzer" -> reports
	for _, act := range graph.Roots {
		for _, d := range act.Diagnostics {
			pos := act.Package.Fset.Position(d.Pos)
			file, err := filepath.Rel(root, pos.Filename)
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("%s:%d:%d %s", filepath.ToSlash(file), pos.Line, pos.Column, act.Analyzer.Name)
			if seen[key] {
				continue // a package and its test variant
			}
			seen[key] = true
			got[filepath.ToSlash(file)+" "+act.Analyzer.Name]++
			t.Logf("%s: %s", key, d.Message)
		}
	}
	want := []string{
		"examples/workitem/naive/children.go createfromlist",
		"examples/workitem/naive/controller.go regetwritten",
		"examples/workitem/naive/controller.go silentdefault",
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Errorf("reports by file and checker:\n  %s\nwant exactly:\n  %s", strings.Join(keys, "\n  "), strings.Join(want, "\n  "))
	}
}
