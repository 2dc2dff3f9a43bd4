package requeue

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/racesafe/racesafe/internal/metricstest"
)

// counterValue reads a counter from controller-runtime's registry.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.CounterValue(t, name, labels)
}

func TestMetricRegistered(t *testing.T) {
	var already prometheus.AlreadyRegisteredError
	if err := metrics.Registry.Register(floorTotal); !errors.As(err, &already) {
		t.Errorf("registering floorTotal again: %v, want AlreadyRegisteredError", err)
	}
}
