package expectations_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/racesafe/racesafe/expectations"
)

// step is one call made before the check under test.
type step struct {
	deletion bool // ExpectDeletion instead of ExpectWrite
	obj      *corev1.ConfigMap
	advance  time.Duration // clock step before the call
}

func write(uid, rv string) step  { return step{obj: configMap("a", uid, rv)} }
func remove(uid, rv string) step { return step{deletion: true, obj: configMap("a", uid, rv)} }
func after(d time.Duration, s step) step {
	s.advance = d
	return s
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name        string
		steps       []step
		advance     time.Duration // clock step before Check
		seen        *corev1.ConfigMap
		wantStale   *expectations.StaleError
		wantRVErr   bool
		wantPending int
	}{
		{name: "no expectation", seen: configMap("a", "u1", "4")},
		{name: "no expectation, malformed rv is still an error", seen: configMap("a", "u1", ""), wantRVErr: true},
		{name: "equal rv is fresh and dropped", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", "5")},
		{name: "higher rv is fresh", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", "7")},
		{
			name: "lower rv is stale", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", "4"),
			wantStale: &expectations.StaleError{Want: "5", Seen: "4"}, wantPending: 1,
		},
		{
			name: "numeric order, not lexical: 9 < 10", steps: []step{write("u1", "10")}, seen: configMap("a", "u1", "9"),
			wantStale: &expectations.StaleError{Want: "10", Seen: "9"}, wantPending: 1,
		},
		{name: "numeric order, not lexical: 10 > 9", steps: []step{write("u1", "9")}, seen: configMap("a", "u1", "10")},
		{
			name: "a later lower rv never lowers", steps: []step{write("u1", "10"), write("u1", "9")}, seen: configMap("a", "u1", "9"),
			wantStale: &expectations.StaleError{Want: "10", Seen: "9"}, wantPending: 1,
		},
		{
			name: "a later higher rv raises", steps: []step{write("u1", "9"), write("u1", "10")}, seen: configMap("a", "u1", "9"),
			wantStale: &expectations.StaleError{Want: "10", Seen: "9"}, wantPending: 1,
		},
		{name: "other uid, higher rv: successor drops it", steps: []step{write("u1", "5")}, seen: configMap("a", "u2", "7")},
		{
			name: "other uid, equal rv: not the object written, stale", steps: []step{write("u1", "5")}, seen: configMap("a", "u2", "5"),
			wantStale: &expectations.StaleError{Want: "5", Seen: "5"}, wantPending: 1,
		},
		{
			name: "deletion: other uid, equal rv is stale", steps: []step{remove("u1", "5")}, seen: configMap("a", "u2", "5"),
			wantStale: &expectations.StaleError{Want: "5", Seen: "5", Deletion: true}, wantPending: 1,
		},
		{
			name: "other uid, lower rv: predecessor is stale", steps: []step{write("u2", "7")}, seen: configMap("a", "u1", "5"),
			wantStale: &expectations.StaleError{Want: "7", Seen: "5"}, wantPending: 1,
		},
		{
			name: "new incarnation replaces", steps: []step{write("u1", "5"), write("u2", "8")}, seen: configMap("a", "u1", "6"),
			wantStale: &expectations.StaleError{Want: "8", Seen: "6"}, wantPending: 1,
		},
		{
			name: "late write of an older incarnation is ignored", steps: []step{write("u2", "8"), write("u1", "5")},
			seen: configMap("a", "u2", "8"),
		},
		{name: "empty uid matches any", steps: []step{write("u1", "5")}, seen: configMap("a", "", "5")},
		{name: "expired at ttl", steps: []step{write("u1", "5")}, advance: ttl, seen: configMap("a", "u1", "4")},
		{
			name: "not expired just before ttl", steps: []step{write("u1", "5")}, advance: ttl - time.Nanosecond,
			seen: configMap("a", "u1", "4"), wantStale: &expectations.StaleError{Want: "5", Seen: "4"}, wantPending: 1,
		},
		{
			name: "a raise restarts the ttl", steps: []step{write("u1", "5"), after(ttl/2, write("u1", "9"))}, advance: ttl / 2,
			seen: configMap("a", "u1", "5"), wantStale: &expectations.StaleError{Want: "9", Seen: "5"}, wantPending: 1,
		},
		{
			name: "a lower write does not restart the ttl", steps: []step{write("u1", "9"), after(ttl/2, write("u1", "5"))}, advance: ttl / 2,
			seen: configMap("a", "u1", "5"),
		},
		{
			name: "deletion: same uid still present", steps: []step{remove("u1", "5")}, seen: configMap("a", "u1", "5"),
			wantStale: &expectations.StaleError{Want: "5", Seen: "5", Deletion: true}, wantPending: 1,
		},
		{
			name: "deletion: same uid updated, e.g. deletionTimestamp set", steps: []step{remove("u1", "5")}, seen: configMap("a", "u1", "9"),
			wantStale: &expectations.StaleError{Want: "5", Seen: "9", Deletion: true}, wantPending: 1,
		},
		{name: "deletion: successor satisfies", steps: []step{remove("u1", "5")}, seen: configMap("a", "u2", "9")},
		{
			name: "deletion: predecessor is stale", steps: []step{remove("u2", "5")}, seen: configMap("a", "u1", "3"),
			wantStale: &expectations.StaleError{Want: "5", Seen: "3", Deletion: true}, wantPending: 1,
		},
		{
			name: "deletion after write wins", steps: []step{write("u1", "5"), remove("u1", "5")}, seen: configMap("a", "u1", "5"),
			wantStale: &expectations.StaleError{Want: "5", Seen: "5", Deletion: true}, wantPending: 1,
		},
		{
			name: "write after deletion stays a deletion", steps: []step{remove("u1", "5"), write("u1", "9")}, seen: configMap("a", "u1", "9"),
			wantStale: &expectations.StaleError{Want: "9", Seen: "9", Deletion: true}, wantPending: 1,
		},
		{name: "deletion expires", steps: []step{remove("u1", "5")}, advance: ttl, seen: configMap("a", "u1", "5")},
		{name: "malformed: empty", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", ""), wantRVErr: true, wantPending: 1},
		{name: "malformed: zero", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", "0"), wantRVErr: true, wantPending: 1},
		{name: "malformed: leading zero", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", "05"), wantRVErr: true, wantPending: 1},
		{name: "malformed: not digits", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", "5a"), wantRVErr: true, wantPending: 1},
		{name: "malformed: negative", steps: []step{write("u1", "5")}, seen: configMap("a", "u1", "-6"), wantRVErr: true, wantPending: 1},
		{
			name: "malformed on a deletion expectation", steps: []step{remove("u1", "5")}, seen: configMap("a", "u1", "x"),
			wantRVErr: true, wantPending: 1,
		},
		{name: "other key is a miss", steps: []step{write("u1", "5")}, seen: configMap("b", "u9", "1"), wantPending: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			tr := expectations.New(expectations.Options{Name: "check-" + tc.name, TTL: ttl, Clock: clk})
			for _, s := range tc.steps {
				clk.Step(s.advance)
				expect := tr.ExpectWrite
				if s.deletion {
					expect = tr.ExpectDeletion
				}
				if err := expect(s.obj); err != nil {
					t.Fatalf("expect %v: %v", s.obj.ObjectMeta, err)
				}
			}
			clk.Step(tc.advance)

			err := tr.Check(tc.seen)

			switch {
			case tc.wantStale != nil:
				var stale *expectations.StaleError
				if !errors.As(err, &stale) || !errors.Is(err, expectations.ErrStale) {
					t.Fatalf("Check = %v, want a *StaleError", err)
				}
				want := *tc.wantStale
				want.Kind = schema.GroupKind{Kind: "ConfigMap"}
				want.Key = client.ObjectKeyFromObject(tc.seen)
				if diff := cmp.Diff(want, *stale); diff != "" {
					t.Errorf("StaleError (-want +got):\n%s", diff)
				}
			case tc.wantRVErr:
				var rvErr *expectations.ResourceVersionError
				if !errors.As(err, &rvErr) || !errors.Is(err, expectations.ErrInvalidResourceVersion) {
					t.Fatalf("Check = %v, want a *ResourceVersionError", err)
				}
				if rvErr.ResourceVersion != tc.seen.ResourceVersion {
					t.Errorf("ResourceVersion = %q, want %q", rvErr.ResourceVersion, tc.seen.ResourceVersion)
				}
				if errors.Is(err, expectations.ErrStale) {
					t.Errorf("a malformed rv must not read as stale: %v", err)
				}
			case err != nil:
				t.Fatalf("Check = %v, want nil", err)
			}
			if got := tr.Pending(); got != tc.wantPending {
				t.Errorf("Pending() = %d, want %d", got, tc.wantPending)
			}
		})
	}
}

// TestSatisfiedAgreesWithCheck: the predicate's read-only view never
// disagrees with the check the reconcile will make, and does not drop.
func TestSatisfiedAgreesWithCheck(t *testing.T) {
	tests := []struct {
		name string
		exp  step
		seen *corev1.ConfigMap
		want bool
	}{
		{name: "fresh", exp: write("u1", "5"), seen: configMap("a", "u1", "5"), want: true},
		{name: "stale", exp: write("u1", "5"), seen: configMap("a", "u1", "4")},
		{name: "successor", exp: write("u1", "5"), seen: configMap("a", "u2", "6"), want: true},
		{name: "predecessor", exp: write("u2", "5"), seen: configMap("a", "u1", "4")},
		{name: "deletion, same uid", exp: remove("u1", "5"), seen: configMap("a", "u1", "6")},
		{name: "deletion, successor", exp: remove("u1", "5"), seen: configMap("a", "u2", "6"), want: true},
		{name: "malformed", exp: write("u1", "5"), seen: configMap("a", "u1", "06")},
		{name: "other key", exp: write("u1", "5"), seen: configMap("b", "u1", "6")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := expectations.New(expectations.Options{Name: "satisfied-" + tc.name})
			expect := tr.ExpectWrite
			if tc.exp.deletion {
				expect = tr.ExpectDeletion
			}
			if err := expect(tc.exp.obj); err != nil {
				t.Fatal(err)
			}
			if got := tr.Satisfied(tc.seen); got != tc.want {
				t.Errorf("Satisfied = %v, want %v", got, tc.want)
			}
			if got := tr.Pending(); got != 1 {
				t.Errorf("Pending() after Satisfied = %d, want 1: Satisfied must not drop", got)
			}
			if checkOK := tr.Check(tc.seen) == nil && tr.Pending() == 0; checkOK != tc.want && tc.seen.Name == "a" {
				t.Errorf("Check satisfied = %v, Satisfied said %v", checkOK, tc.want)
			}
		})
	}
}

func TestCheckAbsent(t *testing.T) {
	key := client.ObjectKey{Namespace: "default", Name: "a"}
	tests := []struct {
		name          string
		exp           *step
		advance       time.Duration
		wantSatisfied float64
		wantExpired   float64
	}{
		{name: "nothing recorded"},
		{name: "deletion is satisfied", exp: &step{deletion: true, obj: configMap("a", "u1", "5")}, wantSatisfied: 1},
		{name: "write is dropped: deleted after our write", exp: &step{obj: configMap("a", "u1", "5")}},
		{name: "expired deletion", exp: &step{deletion: true, obj: configMap("a", "u1", "5")}, advance: ttl, wantExpired: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			name := "absent-" + tc.name
			tr := expectations.New(expectations.Options{Name: name, TTL: ttl, Clock: clk})
			metrics := readDeltas(t, name)
			if tc.exp != nil {
				expect := tr.ExpectWrite
				if tc.exp.deletion {
					expect = tr.ExpectDeletion
				}
				if err := expect(tc.exp.obj); err != nil {
					t.Fatal(err)
				}
			}
			clk.Step(tc.advance)
			if err := tr.CheckAbsent(key, &corev1.ConfigMap{}); err != nil {
				t.Fatalf("CheckAbsent = %v", err)
			}
			if got := tr.Pending(); got != 0 {
				t.Errorf("Pending() = %d, want 0", got)
			}
			if got := metrics.delta("racesafe_expectations_pending"); got != 0 {
				t.Errorf("pending gauge moved by %v, want 0", got)
			}
			if got := metrics.delta("racesafe_expectations_satisfied_total"); got != tc.wantSatisfied {
				t.Errorf("satisfied = %v, want %v", got, tc.wantSatisfied)
			}
			if got := metrics.delta("racesafe_expectations_expired_total"); got != tc.wantExpired {
				t.Errorf("expired = %v, want %v", got, tc.wantExpired)
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	tr := expectations.New(expectations.Options{Name: "invalid-input"})
	var typedNil *corev1.ConfigMap
	noName := configMap("", "u1", "5")
	calls := map[string]func(client.Object) error{
		"ExpectWrite":    tr.ExpectWrite,
		"ExpectDeletion": tr.ExpectDeletion,
		"Check":          tr.Check,
		"Forget":         tr.Forget,
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(nil); !errors.Is(err, expectations.ErrNilObject) {
				t.Errorf("nil: %v, want ErrNilObject", err)
			}
			if err := call(typedNil); !errors.Is(err, expectations.ErrNilObject) {
				t.Errorf("typed nil: %v, want ErrNilObject", err)
			}
			if err := call(noName); !errors.Is(err, expectations.ErrNoName) {
				t.Errorf("no name: %v, want ErrNoName", err)
			}
		})
	}
	t.Run("CheckAbsent", func(t *testing.T) {
		if err := tr.CheckAbsent(client.ObjectKey{Namespace: "default"}, &corev1.ConfigMap{}); !errors.Is(err, expectations.ErrNoName) {
			t.Errorf("no name: %v, want ErrNoName", err)
		}
		key := client.ObjectKey{Namespace: "default", Name: "a"}
		if err := tr.CheckAbsent(key, nil); !errors.Is(err, expectations.ErrNilObject) {
			t.Errorf("nil object: %v, want ErrNilObject", err)
		}
		if err := tr.CheckAbsent(key, typedNil); !errors.Is(err, expectations.ErrNilObject) {
			t.Errorf("typed nil object: %v, want ErrNilObject", err)
		}
	})
	t.Run("Satisfied", func(t *testing.T) {
		if tr.Satisfied(nil) || tr.Satisfied(typedNil) || tr.Satisfied(noName) {
			t.Error("Satisfied of an invalid object = true")
		}
	})
	for _, rv := range []string{"", "0", "007", "1e3", "12 ", "+1", "-1", "٣"} {
		t.Run(fmt.Sprintf("expect malformed rv %q", rv), func(t *testing.T) {
			for name, expect := range map[string]func(client.Object) error{"write": tr.ExpectWrite, "deletion": tr.ExpectDeletion} {
				err := expect(configMap("a", "u1", rv))
				var rvErr *expectations.ResourceVersionError
				if !errors.As(err, &rvErr) || !errors.Is(err, expectations.ErrInvalidResourceVersion) {
					t.Fatalf("%s: %v, want *ResourceVersionError", name, err)
				}
				var cause resourceversion.InvalidResourceVersion
				if !errors.As(err, &cause) {
					t.Errorf("%s: %v does not unwrap to resourceversion.InvalidResourceVersion", name, err)
				}
				if rvErr.Key != (client.ObjectKey{Namespace: "default", Name: "a"}) || rvErr.Kind.Kind != "ConfigMap" || rvErr.ResourceVersion != rv {
					t.Errorf("%s: fields %+v", name, *rvErr)
				}
			}
			if got := tr.Pending(); got != 0 {
				t.Errorf("a malformed expectation was recorded: Pending() = %d", got)
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "a"}
	tests := []struct {
		err  error
		want string
	}{
		{
			err:  &expectations.StaleError{Key: key, Want: "7", Seen: "5"},
			want: "stale cache read: ns/a is at resourceVersion 5 in the cache, older than 7 written by this controller",
		},
		{
			err:  &expectations.StaleError{Key: key, Want: "7", Seen: "9", Deletion: true},
			want: "stale cache read: ns/a was deleted at resourceVersion 7 but the cache still shows it at 9",
		},
		{
			err:  &expectations.ResourceVersionError{Key: key, ResourceVersion: "x", Err: errors.New("bad")},
			want: `invalid resourceVersion "x" of ns/a: bad`,
		},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	wrapped := fmt.Errorf("reconcile: %w", &expectations.StaleError{Key: key, Want: "2", Seen: "1"})
	if !errors.Is(wrapped, expectations.ErrStale) || errors.Is(wrapped, expectations.ErrInvalidResourceVersion) {
		t.Errorf("errors.Is through %%w: %v", wrapped)
	}
}

func TestForget(t *testing.T) {
	name := "forget"
	tr := expectations.New(expectations.Options{Name: name})
	metrics := readDeltas(t, name)
	if err := tr.ExpectWrite(configMap("a", "u1", "5")); err != nil {
		t.Fatal(err)
	}
	if err := tr.ExpectWrite(pod("a", "p1", "5")); err != nil {
		t.Fatal(err)
	}
	forget := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}
	if err := tr.Forget(forget); err != nil {
		t.Fatal(err)
	}
	if err := tr.Forget(forget); err != nil { // twice is harmless
		t.Fatal(err)
	}
	if err := tr.Check(configMap("a", "u1", "4")); err != nil {
		t.Errorf("Check after Forget = %v, want nil", err)
	}
	if err := tr.Check(pod("a", "p1", "4")); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("Forget of a ConfigMap dropped the Pod of its name: Check = %v, want stale", err)
	}
	if got := metrics.delta("racesafe_expectations_pending"); got != 1 {
		t.Errorf("pending gauge moved by %v, want 1 (the Pod)", got)
	}
	if got := metrics.delta("racesafe_expectations_satisfied_total"); got != 0 {
		t.Errorf("Forget counted as satisfied: %v", got)
	}
}

// TestSweep: expectations that are never checked again are dropped by a
// later write, so memory stays bounded without a goroutine.
func TestSweep(t *testing.T) {
	name := "sweep"
	clk := newFakeClock()
	tr := expectations.New(expectations.Options{Name: name, TTL: ttl, Clock: clk})
	metrics := readDeltas(t, name)
	for i := range 100 {
		if err := tr.ExpectWrite(configMap(fmt.Sprint("old-", i), "u", "5")); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(ttl - time.Nanosecond)
	if err := tr.ExpectWrite(configMap("young", "u", "5")); err != nil {
		t.Fatal(err)
	}
	if got := tr.Pending(); got != 101 {
		t.Fatalf("before the ttl: Pending() = %d, want 101", got)
	}
	clk.Step(time.Nanosecond)
	if err := tr.ExpectWrite(configMap("new", "u", "5")); err != nil {
		t.Fatal(err)
	}
	if got := tr.Pending(); got != 2 {
		t.Errorf("after the sweep: Pending() = %d, want 2 (young, new)", got)
	}
	if got := metrics.delta("racesafe_expectations_expired_total"); got != 100 {
		t.Errorf("expired = %v, want 100", got)
	}
	if got := metrics.delta("racesafe_expectations_pending"); got != 2 {
		t.Errorf("pending gauge = %v, want 2", got)
	}
}

func TestMetrics(t *testing.T) {
	name := "metrics"
	clk := newFakeClock()
	tr := expectations.New(expectations.Options{Name: name, TTL: ttl, Clock: clk})
	metrics := readDeltas(t, name)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tr.ExpectWrite(configMap("a", "u1", "5")))
	must(tr.ExpectDeletion(configMap("b", "u2", "6")))
	must(tr.ExpectWrite(configMap("c", "u3", "7")))
	if got := metrics.delta("racesafe_expectations_pending"); got != 3 {
		t.Errorf("pending = %v, want 3", got)
	}

	_ = tr.Check(configMap("a", "u1", "4")) // stale
	_ = tr.Check(configMap("b", "u2", "6")) // stale: still present
	clk.Step(2 * time.Second)
	must(tr.Check(configMap("a", "u1", "5")))                                                     // satisfied after 2s
	must(tr.CheckAbsent(client.ObjectKeyFromObject(configMap("b", "", "")), &corev1.ConfigMap{})) // satisfied after 2s
	clk.Step(ttl)
	must(tr.Check(configMap("c", "u3", "1"))) // expired

	for family, want := range map[string]float64{
		"racesafe_expectations_pending":           0,
		"racesafe_expectations_stale_reads_total": 2,
		"racesafe_expectations_satisfied_total":   2,
		"racesafe_expectations_expired_total":     1,
	} {
		if got := metrics.delta(family); got != want {
			t.Errorf("%s = %v, want %v", family, got, want)
		}
	}
	if count, sum := metrics.histogram("racesafe_expectations_catch_up_seconds"); count != 2 || sum != 4 {
		t.Errorf("catch_up_seconds count=%d sum=%v, want 2 samples summing to 4s", count, sum)
	}
}

func TestDefaults(t *testing.T) {
	tr := expectations.New(expectations.Options{})
	if got := tr.String(); got != "default" {
		t.Errorf("String() = %q, want default", got)
	}
	if err := tr.ExpectWrite(configMap("a", "u1", "5")); err != nil {
		t.Fatal(err)
	}
	// The real clock and a five minute TTL: the write is pending, not expired.
	if err := tr.Check(configMap("a", "u1", "4")); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("Check = %v, want stale", err)
	}
	if expectations.DefaultTTL != 5*time.Minute {
		t.Errorf("DefaultTTL = %v", expectations.DefaultTTL)
	}
}

// TestKindsDoNotShareExpectations: a Pod and a ConfigMap of one name are two
// objects; nothing read of one can satisfy, drop or be refused by the
// other's expectation.
func TestKindsDoNotShareExpectations(t *testing.T) {
	tr := expectations.New(expectations.Options{Name: "kinds"})
	if err := tr.ExpectWrite(pod("a", "p1", "10")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(configMap("a", "c1", "4")); err != nil {
		t.Errorf("ConfigMap at rv4 against a Pod's expectation = %v, want nil", err)
	}
	if err := tr.Check(configMap("a", "c1", "12")); err != nil {
		t.Errorf("ConfigMap at rv12 = %v, want nil", err)
	}
	if got := tr.Pending(); got != 1 {
		t.Errorf("Pending() after ConfigMap reads = %d, want 1: the Pod's expectation", got)
	}
	var stale *expectations.StaleError
	if err := tr.Check(pod("a", "p1", "9")); !errors.As(err, &stale) || stale.Want != "10" {
		t.Fatalf("Pod at rv9 after ConfigMap reads = %v, want stale against 10", err)
	}
	if err := tr.Check(pod("a", "p1", "10")); err != nil {
		t.Errorf("Pod at rv10 = %v, want nil", err)
	}
}

// TestFormsCatchUpSeparately: typed, metadata-only and unstructured reads
// of one kind come from separate informers with separate lag. A form that
// caught up answers fresh; the others are still judged.
func TestFormsCatchUpSeparately(t *testing.T) {
	tr := expectations.New(expectations.Options{Name: "forms"})
	if err := tr.ExpectWrite(pod("a", "p1", "10")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(podMetadata("a", "p1", "10")); err != nil {
		t.Fatalf("metadata-only read at rv10 = %v, want fresh", err)
	}
	if err := tr.Check(pod("a", "p1", "9")); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("typed read at rv9 after the metadata informer caught up = %v, want stale", err)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetNamespace("default")
	u.SetName("a")
	u.SetUID("p1")
	u.SetResourceVersion("9")
	if err := tr.Check(u); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("unstructured read at rv9 = %v, want stale", err)
	}
	if err := tr.Check(podMetadata("a", "p1", "10")); err != nil {
		t.Errorf("metadata-only read again = %v, want fresh", err)
	}
	if err := tr.Check(pod("a", "p1", "10")); err != nil {
		t.Errorf("typed read at rv10 = %v, want fresh", err)
	}
	if err := tr.Check(pod("a", "p1", "9")); err != nil {
		t.Errorf("typed read after the typed informer caught up = %v, want fresh", err)
	}

	// A raised expectation must be caught up with again, by every form.
	if err := tr.ExpectWrite(pod("a", "p1", "11")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Check(podMetadata("a", "p1", "10")); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("metadata-only read at rv10 after a write at rv11 = %v, want stale", err)
	}
	if err := tr.Check(pod("a", "p1", "10")); !errors.Is(err, expectations.ErrStale) {
		t.Errorf("typed read at rv10 after a write at rv11 = %v, want stale", err)
	}
}

// TestMalformedResourceVersionIsNeverFresh: whatever is recorded, expired or
// not, a resourceVersion that cannot be ordered is an error, never nil.
func TestMalformedResourceVersionIsNeverFresh(t *testing.T) {
	tests := []struct {
		name    string
		steps   []step
		advance time.Duration
	}{
		{name: "nothing recorded"},
		{name: "pending", steps: []step{write("u1", "5")}},
		{name: "expired", steps: []step{write("u1", "5")}, advance: ttl},
		{name: "expired deletion", steps: []step{remove("u1", "5")}, advance: 2 * ttl},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			tr := expectations.New(expectations.Options{Name: "malformed-" + tc.name, TTL: ttl, Clock: clk})
			for _, s := range tc.steps {
				expect := tr.ExpectWrite
				if s.deletion {
					expect = tr.ExpectDeletion
				}
				if err := expect(s.obj); err != nil {
					t.Fatal(err)
				}
			}
			clk.Step(tc.advance)
			for _, rv := range []string{"", "0", "05", "x"} {
				err := tr.Check(configMap("a", "u1", rv))
				if !errors.Is(err, expectations.ErrInvalidResourceVersion) || errors.Is(err, expectations.ErrStale) {
					t.Errorf("Check(rv %q) = %v, want only ErrInvalidResourceVersion", rv, err)
				}
			}
		})
	}
}

// TestSweepRunsAtMostOncePerTTL: however long the TTL, up to the largest
// time.Duration, writes sweep at most once per TTL.
func TestSweepRunsAtMostOncePerTTL(t *testing.T) {
	const writes = 3000
	tests := []struct {
		name       string
		ttl        time.Duration
		step       time.Duration // clock step before each write
		wantSweeps float64
	}{
		// Writes at ttl/1000 intervals span three TTLs: a sweep at the
		// 1000th, 2000th and 3000th.
		{name: "one minute", ttl: time.Minute, step: time.Minute / 1000, wantSweeps: 3},
		{name: "two hundred years", ttl: 200 * 365 * 24 * time.Hour, step: time.Hour},
		// now+ttl is past 2262, beyond what UnixNano can hold.
		{name: "two hundred eighty years", ttl: 280 * 365 * 24 * time.Hour, step: time.Hour},
		{name: "MaxInt64", ttl: math.MaxInt64, step: time.Hour},
		{name: "MaxInt64 - 1", ttl: math.MaxInt64 - 1, step: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			name := "sweep-once-" + tc.name
			tr := expectations.New(expectations.Options{Name: name, TTL: tc.ttl, Clock: clk})
			metrics := readDeltas(t, name)
			for i := range writes {
				clk.Step(tc.step)
				if err := tr.ExpectWrite(configMap(fmt.Sprint("item-", i), "u", "5")); err != nil {
					t.Fatal(err)
				}
			}
			if got := metrics.delta("racesafe_expectations_sweeps_total"); got != tc.wantSweeps {
				t.Errorf("%d writes swept %v times, want %v", writes, got, tc.wantSweeps)
			}
		})
	}
}

// TestCaughtUpExpectationIsDropped: the record of a write is kept while
// some form has not caught up, and dropped once all have, or by the sweep.
// A later write with a lower resourceVersion shows which: it is ignored by
// a kept record and recorded afresh once the record is gone.
func TestCaughtUpExpectationIsDropped(t *testing.T) {
	unstructuredPod := func(rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		u.SetNamespace("default")
		u.SetName("a")
		u.SetUID("p1")
		u.SetResourceVersion(rv)
		return u
	}
	t.Run("all forms caught up", func(t *testing.T) {
		tr := expectations.New(expectations.Options{Name: "dropped-all-forms"})
		if err := tr.ExpectWrite(pod("a", "p1", "10")); err != nil {
			t.Fatal(err)
		}
		for _, obj := range []client.Object{pod("a", "p1", "10"), podMetadata("a", "p1", "10")} {
			if err := tr.Check(obj); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.ExpectWrite(pod("a", "p1", "5")); err != nil {
			t.Fatal(err)
		}
		if got := tr.Pending(); got != 0 {
			t.Fatalf("with the unstructured form behind, a lower write was recorded: Pending() = %d, want 0", got)
		}
		if err := tr.Check(unstructuredPod("9")); !errors.Is(err, expectations.ErrStale) {
			t.Fatalf("unstructured read at rv9 = %v, want stale", err)
		}
		if err := tr.Check(unstructuredPod("10")); err != nil {
			t.Fatal(err)
		}
		if err := tr.ExpectWrite(pod("a", "p1", "5")); err != nil {
			t.Fatal(err)
		}
		if got := tr.Pending(); got != 1 {
			t.Errorf("after every form caught up, the record was kept: Pending() = %d, want 1", got)
		}
	})
	t.Run("sweep", func(t *testing.T) {
		clk := newFakeClock()
		tr := expectations.New(expectations.Options{Name: "dropped-sweep", TTL: ttl, Clock: clk})
		if err := tr.ExpectWrite(pod("a", "p1", "10")); err != nil {
			t.Fatal(err)
		}
		if err := tr.Check(pod("a", "p1", "10")); err != nil {
			t.Fatal(err)
		}
		clk.Step(ttl)
		if err := tr.ExpectWrite(configMap("other", "c1", "1")); err != nil { // sweeps
			t.Fatal(err)
		}
		if err := tr.ExpectWrite(pod("a", "p1", "5")); err != nil {
			t.Fatal(err)
		}
		if got := tr.Pending(); got != 2 {
			t.Errorf("the sweep kept a caught-up record past its TTL: Pending() = %d, want 2", got)
		}
	})
}

// widget is a typed object that client-go's scheme does not know.
type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (w *widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// TestUnknownKindIsAnError: an object whose kind cannot be told is refused
// by every call with ErrUnknownKind, never taken as fresh; Options.Scheme
// makes a kind known.
func TestUnknownKindIsAnError(t *testing.T) {
	tr := expectations.New(expectations.Options{Name: "unknown-kind"})
	w := &widget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "w1", ResourceVersion: "5"}}
	noKind := &unstructured.Unstructured{}
	noKind.SetNamespace("default")
	noKind.SetName("a")
	noKind.SetResourceVersion("5")
	noKindMeta := podMetadata("a", "p1", "5")
	noKindMeta.TypeMeta = metav1.TypeMeta{}
	for _, obj := range []client.Object{w, noKind, noKindMeta} {
		calls := map[string]func(client.Object) error{
			"ExpectWrite": tr.ExpectWrite, "ExpectDeletion": tr.ExpectDeletion, "Check": tr.Check, "Forget": tr.Forget,
			"CheckAbsent": func(obj client.Object) error { return tr.CheckAbsent(client.ObjectKeyFromObject(obj), obj) },
			"Reader.Get": func(obj client.Object) error {
				return expectations.NewReader(fake.NewClientBuilder().Build(), tr).Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
			},
		}
		for name, call := range calls {
			if err := call(obj); !errors.Is(err, expectations.ErrUnknownKind) {
				t.Errorf("%s(%T) = %v, want ErrUnknownKind", name, obj, err)
			}
		}
		if tr.Satisfied(obj) {
			t.Errorf("Satisfied(%T) = true", obj)
		}
	}

	s := runtime.NewScheme()
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	s.AddKnownTypes(gv, &widget{})
	known := expectations.New(expectations.Options{Name: "known-kind", Scheme: s})
	if err := known.ExpectWrite(w); err != nil {
		t.Fatalf("ExpectWrite with the kind in Options.Scheme = %v", err)
	}
	older := w.DeepCopyObject().(*widget)
	older.ResourceVersion = "4"
	var stale *expectations.StaleError
	if err := known.Check(older); !errors.As(err, &stale) || stale.Kind != (schema.GroupKind{Group: "example.com", Kind: "widget"}) {
		t.Errorf("Check = %v, want stale for widget.example.com", err)
	}
}

// TestCheckDoesNotAllocate: the paths a busy controller takes on every read
// (no expectation, and a fresh read) allocate nothing, in every form.
func TestCheckDoesNotAllocate(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetNamespace("default")
	u.SetName("a")
	u.SetUID("p1")
	u.SetResourceVersion("10")
	for _, obj := range []client.Object{pod("a", "p1", "10"), podMetadata("a", "p1", "10"), u} {
		tr := expectations.New(expectations.Options{Name: "allocs"})
		written := pod("a", "p1", "10")
		miss := testing.AllocsPerRun(100, func() {
			if err := tr.Check(obj); err != nil {
				t.Fatal(err)
			}
		})
		// Forget, write, and the form catches up: every run takes the path
		// of a first fresh read.
		catchUp := testing.AllocsPerRun(100, func() {
			if err := tr.Forget(written); err != nil {
				t.Fatal(err)
			}
			if err := tr.ExpectWrite(written); err != nil {
				t.Fatal(err)
			}
			if err := tr.Check(obj); err != nil {
				t.Fatal(err)
			}
		})
		caughtUp := testing.AllocsPerRun(100, func() {
			if err := tr.Check(obj); err != nil {
				t.Fatal(err)
			}
		})
		if miss != 0 || catchUp != 0 || caughtUp != 0 {
			t.Errorf("%T: allocations per Check: %v on a miss, %v catching up (with Forget and ExpectWrite), %v caught up; want 0",
				obj, miss, catchUp, caughtUp)
		}
	}
}
