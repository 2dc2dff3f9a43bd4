// Package predicate is a stub of controller-runtime's.
package predicate

type GenerationChangedPredicate struct{}
