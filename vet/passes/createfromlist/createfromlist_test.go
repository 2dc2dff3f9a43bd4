package createfromlist_test

import (
	"testing"

	"github.com/racesafe/racesafe/vet/internal/vettest"
	"github.com/racesafe/racesafe/vet/passes/createfromlist"
)

func TestAnalyzer(t *testing.T) { vettest.Run(t, createfromlist.Analyzer) }
