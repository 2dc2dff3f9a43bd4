// Command racesafevet runs the racesafe checkers: the incident's patterns
// (a cached re-read into a written object, a phase switch that ends
// silently, a child created from a cached List, a stale write-back, a
// conflict retry that retries nothing) in a controller's code, without
// running it.
//
//	go run github.com/racesafe/racesafe/vet/cmd/racesafevet@latest ./...
//	go vet -vettool=$(go env GOPATH)/bin/racesafevet ./...
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/racesafe/racesafe/vet"
)

func main() { multichecker.Main(vet.Analyzers...) }
