package racetest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

func createNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: itemName(t)}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func delta(after, before map[string]int, resource string) int {
	return after[resource] - before[resource]
}

// poll waits for cond, failing t with what after 30 seconds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// testBrokenWatchesResume breaks a ConfigMap informer's stream (protobuf
// framed) at random events of a burst of updates: each break is followed by
// a new watch from the last resourceVersion, not a relist, and the cache
// ends at the server's state.
func testBrokenWatchesResume(t *testing.T, cfg *rest.Config) {
	direct := directClient(t, cfg)
	ns := createNamespace(t, direct)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: ns}, Data: map[string]string{"step": "0"}}
	if err := direct.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	var on atomic.Bool
	wf, err := racetest.NewWatchFaults(racetest.WatchFaultOptions{Seed: 3, Break: 0.3, Match: func(r racetest.Request) bool {
		return on.Load() && r.Resource == "configmaps"
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := wf.NewCache(cfg, cache.Options{HTTPClient: httpClient(t, cfg), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunCache(t.Context(), t, c)
	waitForRV(t, c, cm, cm.ResourceVersion)

	before := wf.Counts()
	on.Store(true)
	for i := 1; i <= 30; i++ {
		cm.Data["step"] = fmt.Sprint(i)
		if err := direct.Update(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	waitForRV(t, c, cm, cm.ResourceVersion)
	broken := delta(wf.Counts().Broken, before.Broken, "configmaps")
	if broken == 0 {
		t.Fatal("no stream broke in 30 events at rate 0.3")
	}
	poll(t, "a new watch after every break", func() bool {
		return delta(wf.Counts().Watches, before.Watches, "configmaps") >= broken
	})
	after := wf.Counts()
	if n := delta(after.Lists, before.Lists, "configmaps"); n != 0 {
		t.Errorf("%d relists, want none: a break resumes from the last resourceVersion", n)
	}
	t.Logf("%d breaks, %d new watches; the cache is at resourceVersion %s", broken,
		delta(after.Watches, before.Watches, "configmaps"), cm.ResourceVersion)
}

// testExpectationsAcrossARelist records a write, breaks the informer's
// stream and answers its resumption 410 Gone, so that it must relist, all
// behind a lag. Through it all an expectations.Reader over the cache hands
// out nothing older than the write recorded last, and once the relist is in
// nothing waits: the last write is read and the tracker has nothing pending.
func testExpectationsAcrossARelist(t *testing.T, cfg *rest.Config) {
	direct := directClient(t, cfg)
	in := newItem(itemName(t))
	if err := direct.Create(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	var on atomic.Bool
	wf, err := racetest.NewWatchFaults(racetest.WatchFaultOptions{Break: 1, Gone: 1, Limit: 2, Match: func(r racetest.Request) bool {
		return on.Load() && r.Resource == "items"
	}})
	if err != nil {
		t.Fatal(err)
	}
	newCache := racetest.LaggedCache(racetest.LagOptions{Delay: 50 * time.Millisecond, WatchFaults: wf})
	c, err := newCache(cfg, cache.Options{HTTPClient: httpClient(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunCache(t.Context(), t, c)
	tracker := expectations.New(expectations.Options{Name: itemName(t)})
	reader := expectations.NewReader(c, tracker)
	readFresh(t, reader, in) // starts the informer and waits for its sync

	before := wf.Counts()
	on.Store(true)
	write := func(step string) string {
		t.Helper()
		in.SetLabels(map[string]string{"step": step})
		if err := direct.Update(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		if err := tracker.ExpectWrite(in); err != nil {
			t.Fatal(err)
		}
		return in.GetResourceVersion()
	}
	write("1")
	poll(t, "the stream breaks", func() bool { return delta(wf.Counts().Broken, before.Broken, "items") == 1 })
	last := write("2")

	stale := 0
	poll(t, "the Reader hands out the last write", func() bool {
		u := newItem(in.GetName())
		err := reader.Get(t.Context(), client.ObjectKeyFromObject(in), u)
		switch {
		case errors.Is(err, expectations.ErrStale):
			stale++
			return false
		case err != nil:
			t.Fatalf("Get: %v", err)
		case u.GetResourceVersion() != last:
			t.Fatalf("the Reader handed out resourceVersion %s (step %s), older than the recorded %s",
				u.GetResourceVersion(), u.GetLabels()["step"], last)
		}
		return true
	})
	if n := tracker.Pending(); n != 0 {
		t.Errorf("tracker.Pending() = %d once the last write was read, want 0", n)
	}
	after := wf.Counts()
	if n := delta(after.Gone, before.Gone, "items"); n != 1 {
		t.Errorf("%d watches answered 410, want 1", n)
	}
	if n := delta(after.Lists, before.Lists, "items"); n < 1 {
		t.Errorf("%d relists after the 410, want at least 1", n)
	}
	t.Logf("%d stale reads refused; %d relists, %d watches", stale,
		delta(after.Lists, before.Lists, "items"), delta(after.Watches, before.Watches, "items"))

	// Limit is spent: the informer watches again, and the next write comes
	// by its watch, not by another relist.
	last = write("3")
	if got := readFresh(t, reader, in).GetResourceVersion(); got != last {
		t.Errorf("after the recovery the Reader handed out resourceVersion %s, want %s", got, last)
	}
	if got := delta(wf.Counts().Lists, after.Lists, "items"); got != 0 {
		t.Errorf("%d more relists for a write after the recovery, want 0", got)
	}
}
