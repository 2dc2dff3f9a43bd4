package regetwritten_test

import (
	"testing"

	"github.com/racesafe/racesafe/vet/internal/vettest"
	"github.com/racesafe/racesafe/vet/passes/regetwritten"
)

func TestAnalyzer(t *testing.T) { vettest.Run(t, regetwritten.Analyzer) }
