package racetest_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/racesafe/racesafe/racetest"
)

func TestExploreRefusesIncompleteOptions(t *testing.T) {
	setup := func(manager.Manager) error { return nil }
	work := func(context.Context, client.Client, string) error { return nil }
	settled := func(context.Context, client.Reader, string) (bool, error) { return true, nil }
	full := racetest.ExploreOptions{Scheme: scheme.Scheme, Setup: setup, Workload: work, Settled: settled}
	for name, mutate := range map[string]func(*racetest.ExploreOptions){
		"no scheme":         func(o *racetest.ExploreOptions) { o.Scheme = nil },
		"no setup":          func(o *racetest.ExploreOptions) { o.Setup = nil },
		"no workload":       func(o *racetest.ExploreOptions) { o.Workload = nil },
		"no settled":        func(o *racetest.ExploreOptions) { o.Settled = nil },
		"negative timeout":  func(o *racetest.ExploreOptions) { o.PlanTimeout = -1 },
		"negative parallel": func(o *racetest.ExploreOptions) { o.Parallel = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			o := full
			mutate(&o)
			// The options are refused before the API server is reached: a
			// nil config is never used.
			if _, err := racetest.Explore(t.Context(), nil, o); !errors.Is(err, racetest.ErrExploreOptions) {
				t.Fatalf("Explore = %v, want ErrExploreOptions", err)
			}
		})
	}
}
