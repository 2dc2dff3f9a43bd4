package stalewriteback_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/racesafe/racesafe/vet/passes/stalewriteback"
)

func TestAnalyzer(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	analysistest.Run(t, dir, stalewriteback.Analyzer, "stalewriteback/...")
}
