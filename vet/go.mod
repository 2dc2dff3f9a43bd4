// racesafe vet: go/analysis checkers for the incident's patterns. A module
// of its own, so that golang.org/x/tools never enters the module graph of a
// project that depends on the racesafe library.
module github.com/racesafe/racesafe/vet

go 1.26.0

require (
	github.com/golangci/plugin-module-register v0.1.2
	golang.org/x/tools v0.51.0
)

require (
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
)
