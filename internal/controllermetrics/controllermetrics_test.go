package controllermetrics_test

import (
	"slices"
	"strconv"
	"sync/atomic"
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

// The vectors are registered once per process, as a package's are: go test
// -count=2 runs each test twice in one binary. Each run reads its own
// series, by a controller name of its own.
var (
	testCounter = controllermetrics.Counter("racesafe_controllermetrics_test_total", "test counter", "verb")
	testGauge   = controllermetrics.Gauge("racesafe_controllermetrics_test_gauge", "test gauge")
	testHist    = controllermetrics.Histogram("racesafe_controllermetrics_test_seconds", "test histogram", controllermetrics.LagBuckets(), "kind")
	twice       = controllermetrics.Counter("racesafe_controllermetrics_twice_total", "once")
	runs        atomic.Int64
)

// metricOf returns the series of f whose controller label is controller.
func metricOf(t *testing.T, f *dto.MetricFamily, controller string) *dto.Metric {
	t.Helper()
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == controller {
				return m
			}
		}
	}
	t.Fatalf("%s has no series for controller %q", f.GetName(), controller)
	return nil
}

func TestVectorsAreServedByTheManagersRegistryWithTheControllerLabel(t *testing.T) {
	run := strconv.FormatInt(runs.Add(1), 10)
	testCounter.WithLabelValues("a"+run, "create").Add(2)
	if got := metricstest.CounterValue(t, "racesafe_controllermetrics_test_total", map[string]string{"controller": "a" + run, "verb": "create"}); got != 2 {
		t.Errorf("counter = %v, want 2", got)
	}

	testGauge.WithLabelValues("b" + run).Set(3)
	m := metricOf(t, family(t, "racesafe_controllermetrics_test_gauge"), "b"+run)
	if got := labelNames(m); !slices.Equal(got, []string{"controller"}) {
		t.Errorf("gauge labels = %v, want [controller]", got)
	}
	if got := m.GetGauge().GetValue(); got != 3 {
		t.Errorf("gauge = %v, want 3", got)
	}

	testHist.WithLabelValues("c"+run, "Pod").Observe(0.002)
	m = metricOf(t, family(t, "racesafe_controllermetrics_test_seconds"), "c"+run)
	if got := labelNames(m); !slices.Equal(got, []string{"controller", "kind"}) {
		t.Errorf("histogram labels = %v, want [controller kind]", got)
	}
	if got, want := len(m.GetHistogram().GetBucket()), len(controllermetrics.LagBuckets()); got != want {
		t.Errorf("histogram has %d buckets, want %d", got, want)
	}
}

func TestASecondRegistrationOfANamePanics(t *testing.T) {
	_ = twice
	defer func() {
		if recover() == nil {
			t.Error("a second Counter of the same name did not panic: two packages could count into different vectors under one name")
		}
	}()
	controllermetrics.Counter("racesafe_controllermetrics_twice_total", "twice")
}
