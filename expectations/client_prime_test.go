package expectations_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/expectations"
)

// TestPrimedDeletionHidesEveryOlderCopy: a new leader's cache holds an
// object its predecessor moved on (an intermediate version the cache has
// not delivered yet) and then deleted. Prime finds it absent from the live
// List; once the cache delivers the intermediate version, newer than the
// copy Prime saw but older than the List, Get and List must still say
// NotFound: the name was free at the List's version, so every copy at or
// below it is gone. Kept at the cached copy's version instead, the soak's
// new leader read the intermediate Deleting copy, with its finalizer, and
// ran the uninstall a second time. With a selector (absent from the List
// may mean relabelled) the deletion is read back live, to the same end.
func TestPrimedDeletionHidesEveryOlderCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []client.ListOption
	}{
		{"whole namespace", []client.ListOption{client.InNamespace("default")}},
		{"label selected", []client.ListOption{client.InNamespace("default"), client.MatchingLabels{"app": "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newListCache()
			ctx := t.Context()
			c, err := expectations.NewClient(l.client(), expectations.ClientOptions{Name: "primed-gone", APIReader: l.server()})
			if err != nil {
				t.Fatal(err)
			}
			at := func(rv, phase string) *corev1.ConfigMap {
				return &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item", UID: "u-item", ResourceVersion: rv, Labels: map[string]string{"app": "x"}},
					Data:       map[string]string{"phase": phase},
				}
			}
			// The cache shows 101; the predecessor wrote 105 and deleted
			// the object; the server is at 110 and holds nothing.
			l.show(at("101", "Failed"))
			l.rv.Store(110)
			res, err := c.Prime(ctx, l.server(), &corev1.ConfigMapList{}, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if res.Gone != 1 {
				t.Fatalf("Prime = %+v, want 1 gone", res)
			}
			key := client.ObjectKey{Namespace: "default", Name: "item"}
			for _, shown := range []*corev1.ConfigMap{at("101", "Failed"), at("105", "Deleting"), at("110", "Deleting")} {
				l.show(shown)
				if err := c.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
					t.Errorf("cache at %s (%s): Get = %v, want NotFound", shown.ResourceVersion, shown.Data["phase"], err)
				}
				var list corev1.ConfigMapList
				if err := c.List(ctx, &list, tc.opts...); err != nil || len(list.Items) != 0 {
					t.Errorf("cache at %s (%s): List = %v, %d items, want none", shown.ResourceVersion, shown.Data["phase"], err, len(list.Items))
				}
			}
			// A new object under the name, created after the List, is served.
			l.show(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "item", UID: "u-new", ResourceVersion: "111", Labels: map[string]string{"app": "x"}}})
			if err := c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
				t.Errorf("a new object under the name, at 111: Get = %v, want it served", err)
			}
		})
	}
}
