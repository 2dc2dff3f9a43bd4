// Package vet lists racesafe's checkers, for a driver (cmd/racesafevet, a
// golangci-lint plugin) to run; each lives in its own package under passes.
// docs/vet.md says what each reports and how to silence one.
package vet

import (
	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/passes/conflictretry"
	"github.com/racesafe/racesafe/vet/passes/createfromlist"
	"github.com/racesafe/racesafe/vet/passes/regetwritten"
	"github.com/racesafe/racesafe/vet/passes/silentdefault"
	"github.com/racesafe/racesafe/vet/passes/stalewriteback"
)

// Analyzers are every racesafe checker.
var Analyzers = []*analysis.Analyzer{
	regetwritten.Analyzer,
	silentdefault.Analyzer,
	createfromlist.Analyzer,
	stalewriteback.Analyzer,
	conflictretry.Analyzer,
}
