package regetwritten_test

import (
	"testing"

	"github.com/racesafe/racesafe/vet/internal/vettest"
	"github.com/racesafe/racesafe/vet/passes/regetwritten"
)

func TestAnalyzer(t *testing.T) { vettest.Run(t, regetwritten.Analyzer) }

// TestSuggestedFix: the fresh-local fix reads into latest and leaves the
// written object alone; none where latest is taken or the type is an
// interface (testdata/src/regetwritten/fix/fix.go.golden).
func TestSuggestedFix(t *testing.T) {
	vettest.RunWithSuggestedFixes(t, regetwritten.Analyzer, "regetwritten/fix")
}
