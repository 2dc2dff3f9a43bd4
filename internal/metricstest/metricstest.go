// Package metricstest reads racesafe's metrics back from controller-runtime's
// registry in tests, proving they are registered where a manager serves them.
// (prometheus/testutil would do, but its diff dependency is not in go.mod.)
package metricstest

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// CounterValue returns the counter name with exactly labels from
// metrics.Registry; a label set never counted reads as zero.
func CounterValue(tb testing.TB, name string, labels map[string]string) float64 {
	tb.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
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
