package expectations_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

const ttl = time.Minute

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// configMap returns default/name with the given UID and resourceVersion.
func configMap(name, uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: name, UID: types.UID(uid), ResourceVersion: rv,
	}}
}

func newFakeClock() *testingclock.FakeClock { return testingclock.NewFakeClock(epoch) }

// metricSample reads one tracker's series of a family from controller-runtime's
// Registry, which also proves the family is registered there. A counter or
// gauge yields its value; a histogram its sample count and sum.
type metricSample struct {
	value float64
	count uint64
	sum   float64
}

func readMetric(t *testing.T, family, tracker string) metricSample {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "tracker" || l.GetValue() != tracker {
					continue
				}
				switch {
				case m.GetCounter() != nil:
					return metricSample{value: m.GetCounter().GetValue()}
				case m.GetGauge() != nil:
					return metricSample{value: m.GetGauge().GetValue()}
				case m.GetHistogram() != nil:
					return metricSample{count: m.GetHistogram().GetSampleCount(), sum: m.GetHistogram().GetSampleSum()}
				}
			}
		}
		t.Fatalf("%s has no series for tracker %q", family, tracker)
	}
	t.Fatalf("%s is not registered on controller-runtime's metrics.Registry", family)
	return metricSample{}
}
