package silentdefault_test

import (
	"testing"

	"github.com/racesafe/racesafe/vet/internal/vettest"
	"github.com/racesafe/racesafe/vet/passes/silentdefault"
)

func TestAnalyzer(t *testing.T) { vettest.Run(t, silentdefault.Analyzer) }
