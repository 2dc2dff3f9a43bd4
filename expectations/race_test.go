package expectations_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
)

// TestConcurrent runs writers, checkers and predicates on one shared key and
// on keys of their own. Under -race it proves the locking; the invariants
// after the storm prove that no write was lost or lowered.
func TestConcurrent(t *testing.T) {
	const workers, rounds = 16, 300
	tr := expectations.New(expectations.Options{Name: "concurrent"})
	shared := client.ObjectKey{Namespace: "default", Name: "shared"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			own := fmt.Sprint("own-", w)
			for i := 1; i <= rounds; i++ {
				// Each worker writes its own ascending slice of the shared
				// key's resourceVersions, interleaved with the others.
				rv := strconv.Itoa(i*workers + w)
				if err := tr.ExpectWrite(configMap("shared", "u", rv)); err != nil {
					t.Error(err)
					return
				}
				err := tr.Check(configMap("shared", "u", strconv.Itoa(i)))
				if err != nil && !errors.Is(err, expectations.ErrStale) {
					t.Errorf("Check shared: %v", err)
				}
				_ = tr.Satisfied(configMap("shared", "u", rv))
				_ = tr.Pending()

				// The worker's own key: write, see a stale copy, then catch up.
				if err := tr.ExpectWrite(configMap(own, "u", strconv.Itoa(i+1))); err != nil {
					t.Error(err)
					return
				}
				if err := tr.Check(configMap(own, "u", strconv.Itoa(i))); !errors.Is(err, expectations.ErrStale) {
					t.Errorf("Check %s stale copy = %v, want stale", own, err)
				}
				if err := tr.Check(configMap(own, "u", strconv.Itoa(i+1))); err != nil {
					t.Errorf("Check %s fresh copy = %v", own, err)
				}
				if i%50 == 0 {
					_ = tr.CheckAbsent(client.ObjectKey{Namespace: "default", Name: own}, &corev1.ConfigMap{})
					if err := tr.Forget(configMap(own, "", "")); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()

	// Only the shared key may be left, at the highest rv anyone wrote, unless
	// a check at rv ≥ the highest happened (none does: checks use i ≤ rounds).
	if got := tr.Pending(); got != 1 {
		t.Fatalf("Pending() = %d, want 1 (the shared key)", got)
	}
	highest := strconv.Itoa(rounds*workers + workers - 1)
	var stale *expectations.StaleError
	if err := tr.Check(configMap(shared.Name, "u", strconv.Itoa(rounds))); !errors.As(err, &stale) || stale.Want != highest {
		t.Fatalf("shared key: Check = %v, want stale with Want=%s", err, highest)
	}
	if err := tr.Check(configMap(shared.Name, "u", highest)); err != nil || tr.Pending() != 0 {
		t.Fatalf("shared key at the highest rv: Check = %v, Pending %d", err, tr.Pending())
	}
}

// hookClock runs onNow once, inside the next call of Now: a deterministic
// way to interleave another call with a Check between its read lock and
// its write lock.
type hookClock struct {
	clock.PassiveClock
	onNow func()
}

func (c *hookClock) Now() time.Time {
	if f := c.onNow; f != nil {
		c.onNow = nil
		f()
	}
	return c.PassiveClock.Now()
}

// TestCheckRejudgesAfterConcurrentWrite: a write that raises the expectation
// after Check judged an object fresh under the read lock must not be dropped
// by that Check.
func TestCheckRejudgesAfterConcurrentWrite(t *testing.T) {
	clk := &hookClock{PassiveClock: newFakeClock()}
	tr := expectations.New(expectations.Options{Name: "rejudge", Clock: clk})
	if err := tr.ExpectWrite(configMap("a", "u1", "5")); err != nil {
		t.Fatal(err)
	}
	clk.onNow = func() {
		if err := tr.ExpectWrite(configMap("a", "u1", "9")); err != nil {
			t.Error(err)
		}
	}
	err := tr.Check(configMap("a", "u1", "5"))
	var stale *expectations.StaleError
	if !errors.As(err, &stale) || stale.Want != "9" {
		t.Fatalf("Check = %v, want stale against the raised expectation 9", err)
	}
	if got := tr.Pending(); got != 1 {
		t.Errorf("Pending() = %d, want 1", got)
	}
}
