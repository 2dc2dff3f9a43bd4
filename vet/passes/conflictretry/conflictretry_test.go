package conflictretry_test

import (
	"testing"

	"github.com/racesafe/racesafe/vet/internal/vettest"
	"github.com/racesafe/racesafe/vet/passes/conflictretry"
)

func TestAnalyzer(t *testing.T) { vettest.Run(t, conflictretry.Analyzer) }
