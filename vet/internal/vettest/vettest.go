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

// Run runs a on testdata/src/<a.Name>/... and checks its // want comments.
func Run(t *testing.T, a *analysis.Analyzer) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "testdata")
	analysistest.Run(t, dir, a, a.Name+"/...")
}
