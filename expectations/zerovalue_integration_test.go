package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/internal/testenv"
)

// TestZeroOptionsOverCRDIntegration is an outside adopter's code on a real
// API server: the WorkItem CRD, a controller-runtime informer cache (which
// has no Scheme() to give), a client, and a Tracker from
// expectations.Options{}. Reads through NewReader(cache, tracker) work and
// a status write recorded with the tracker makes the cache's older copy
// stale until the cache shows the write.
func TestZeroOptionsOverCRDIntegration(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDDirectoryPaths: []string{"../examples/workitem/config/crd"}})
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := testenv.Client(t, env.Config, client.Options{Scheme: s})
	informers, err := cache.New(env.Config, cache.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunCache(t.Context(), t, informers, &v1.WorkItem{})

	tracker := expectations.New(expectations.Options{})
	reader := expectations.NewReader(informers, tracker)
	const n = 10
	for i := range n {
		item := &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("zero-%d", i)}, Spec: v1.WorkItemSpec{Payload: "p"}}
		if err := c.Create(t.Context(), item); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKeyFromObject(item)
		cached := &v1.WorkItem{}
		if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err := reader.Get(ctx, key, cached)
			return err == nil, client.IgnoreNotFound(err)
		}); err != nil {
			t.Fatalf("Reader.Get of %s over the cache, Tracker from Options{}: %v", key, err)
		}
		item.Status.Phase = v1.PhaseInstalling
		if err := c.Status().Update(t.Context(), item); err != nil {
			t.Fatal(err)
		}
		if err := tracker.ExpectWrite(item); err != nil {
			t.Fatalf("ExpectWrite of the server's answer (no TypeMeta): %v", err)
		}
		if err := tracker.Check(cached); !errors.Is(err, expectations.ErrStale) {
			t.Errorf("Check of the copy read before the write = %v, want ErrStale", err)
		}
		if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err := reader.Get(ctx, key, cached)
			if errors.Is(err, expectations.ErrStale) {
				return false, nil
			}
			return err == nil, err
		}); err != nil {
			t.Fatalf("the cache never caught up with %s: %v", key, err)
		}
		if cached.Status.Phase != v1.PhaseInstalling {
			t.Errorf("%s read at phase %q, want %q", key, cached.Status.Phase, v1.PhaseInstalling)
		}
	}
}
