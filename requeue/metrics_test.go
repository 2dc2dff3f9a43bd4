package requeue

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// counterValue reads a counter from controller-runtime's registry, the one a
// manager serves on /metrics. A label set never counted reads as zero.
// (prometheus/testutil would do, but its diff dependency is not in go.mod.)
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestMetricRegistered(t *testing.T) {
	var already prometheus.AlreadyRegisteredError
	if err := metrics.Registry.Register(floorTotal); !errors.As(err, &already) {
		t.Errorf("registering floorTotal again: %v, want AlreadyRegisteredError", err)
	}
}
