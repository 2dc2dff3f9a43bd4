package stalewriteback_test

import (
	"testing"

	"github.com/racesafe/racesafe/vet/internal/vettest"
	"github.com/racesafe/racesafe/vet/passes/stalewriteback"
)

func TestAnalyzer(t *testing.T) { vettest.Run(t, stalewriteback.Analyzer) }
