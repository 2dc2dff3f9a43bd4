package expectations_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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

// withKeys32 gives cm 32 more data keys and 3 more labels: the larger
// object of the Get benchmarks.
func withKeys32(cm *corev1.ConfigMap) *corev1.ConfigMap {
	for i := range 32 {
		cm.Data["key-"+strconv.Itoa(i)] = "value of key " + strconv.Itoa(i)
	}
	for i := range 3 {
		cm.Labels["label-"+strconv.Itoa(i)] = "v"
	}
	return cm
}

// cacheReads are interceptor funcs that serve Get and List from *cache, as
// a manager's client reads from its informers while it writes to the
// server; a test may replace *cache with a newer view.
func cacheReads(cache *client.WithWatch) interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return (*cache).Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return (*cache).List(ctx, list, opts...)
		},
	}
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
				if l.GetName() != "controller" || l.GetValue() != tracker {
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

// pod returns default/name with the given UID and resourceVersion.
func pod(name, uid, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: name, UID: types.UID(uid), ResourceVersion: rv,
	}}
}

// podMetadata is pod as a metadata-only informer holds it.
func podMetadata(name, uid, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, UID: types.UID(uid), ResourceVersion: rv,
		},
	}
}

// metricDeltas reads a tracker's series now, and later how much each moved:
// the registry is process-wide and a tracker name is reused by -count=2.
type metricDeltas struct {
	t       *testing.T
	tracker string
	before  map[string]metricSample
}

var trackerFamilies = []string{
	"racesafe_expectations_pending",
	"racesafe_expectations_stale_reads_total",
	"racesafe_expectations_satisfied_total",
	"racesafe_expectations_expired_total",
	"racesafe_expectations_sweeps_total",
	"racesafe_expectations_catch_up_seconds",
}

func readDeltas(t *testing.T, tracker string) *metricDeltas {
	t.Helper()
	d := &metricDeltas{t: t, tracker: tracker, before: map[string]metricSample{}}
	for _, f := range trackerFamilies {
		d.before[f] = readMetric(t, f, tracker)
	}
	return d
}

// delta returns how much a counter or gauge moved since readDeltas.
func (d *metricDeltas) delta(family string) float64 {
	d.t.Helper()
	return readMetric(d.t, family, d.tracker).value - d.before[family].value
}

// histogram returns the samples and their sum observed since readDeltas.
func (d *metricDeltas) histogram(family string) (uint64, float64) {
	d.t.Helper()
	now := readMetric(d.t, family, d.tracker)
	return now.count - d.before[family].count, now.sum - d.before[family].sum
}

// clientOver is NewClient for a test whose wrapped client reads the
// server's own state (a fake, an in-memory cache): it is its API reader
// too, unless opts names one.
func clientOver(c client.Client, opts expectations.ClientOptions) (*expectations.Client, error) {
	if opts.APIReader == nil {
		opts.APIReader = c
	}
	return expectations.NewClient(c, opts)
}
