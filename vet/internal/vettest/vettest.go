// Package vettest runs a racesafe checker's analysistest suite on the
// shared testdata: the stubs of controller-runtime, client-go and racesafe
// under vet/testdata/src, and one package tree per checker.
package vettest

import (
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
)

// Dir is the testdata directory that holds src/.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// Run runs a on testdata/src/<a.Name>/... and checks its // want comments.
func Run(t *testing.T, a *analysis.Analyzer) {
	t.Helper()
	analysistest.Run(t, Dir(), a, a.Name+"/...")
}

// RunWithSuggestedFixes runs a on testdata/src/<pkg>, checks its // want
// comments, applies every suggested fix and compares each file with its
// .golden twin.
func RunWithSuggestedFixes(t *testing.T, a *analysis.Analyzer, pkg string) {
	t.Helper()
	analysistest.RunWithSuggestedFixes(t, Dir(), a, pkg)
}
