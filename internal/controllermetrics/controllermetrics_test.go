package controllermetrics_test

import (
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/racesafe/racesafe/internal/controllermetrics"
	"github.com/racesafe/racesafe/internal/metricstest"
)

// family gathers metrics.Registry and returns the family named name.
func family(t *testing.T, name string) *dto.MetricFamily {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("%s is not on metrics.Registry", name)
	return nil
}

func labelNames(m *dto.Metric) []string {
	var out []string
	for _, l := range m.GetLabel() {
		out = append(out, l.GetName())
	}
	return out
}

func TestVectorsAreServedByTheManagersRegistryWithTheControllerLabel(t *testing.T) {
	c := controllermetrics.Counter("racesafe_controllermetrics_test_total", "test counter", "verb")
	c.WithLabelValues("a", "create").Add(2)
	if got := metricstest.CounterValue(t, "racesafe_controllermetrics_test_total", map[string]string{"controller": "a", "verb": "create"}); got != 2 {
		t.Errorf("counter = %v, want 2", got)
	}

	g := controllermetrics.Gauge("racesafe_controllermetrics_test_gauge", "test gauge")
	g.WithLabelValues("b").Set(3)
	f := family(t, "racesafe_controllermetrics_test_gauge")
	if got := labelNames(f.GetMetric()[0]); !slices.Equal(got, []string{"controller"}) {
		t.Errorf("gauge labels = %v, want [controller]", got)
	}
	if got := f.GetMetric()[0].GetGauge().GetValue(); got != 3 {
		t.Errorf("gauge = %v, want 3", got)
	}

	h := controllermetrics.Histogram("racesafe_controllermetrics_test_seconds", "test histogram", controllermetrics.LagBuckets(), "kind")
	h.WithLabelValues("c", "Pod").Observe(0.002)
	f = family(t, "racesafe_controllermetrics_test_seconds")
	m := f.GetMetric()[0]
	if got := labelNames(m); !slices.Equal(got, []string{"controller", "kind"}) {
		t.Errorf("histogram labels = %v, want [controller kind]", got)
	}
	if got, want := len(m.GetHistogram().GetBucket()), len(controllermetrics.LagBuckets()); got != want {
		t.Errorf("histogram has %d buckets, want %d", got, want)
	}
}

func TestASecondRegistrationOfANamePanics(t *testing.T) {
	controllermetrics.Counter("racesafe_controllermetrics_twice_total", "once")
	defer func() {
		if recover() == nil {
			t.Error("a second Counter of the same name did not panic: two packages could count into different vectors under one name")
		}
	}()
	controllermetrics.Counter("racesafe_controllermetrics_twice_total", "twice")
}
