package expectations

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

type versionStore struct {
	toolscache.Store
	rv string
}

func (s versionStore) LastStoreSyncResourceVersion() string { return s.rv }

// TestNamespaceVersionsAreKeptOnlyWhileTheStoreCannotSay: a cluster-wide
// informer's store gives the version; where it cannot (client-go before
// v0.36, AtomicFIFO off), one informer is still one stream and keeps one
// maximum: remembering every namespace an event was seen in grew without
// bound as namespaces came and went (issue 35, 11: +16 MiB after 200,000
// namespaces). A multi-namespace informer (no store) keeps one per
// namespace, which are those its cache was configured with.
func TestNamespaceVersionsAreKeptOnlyWhileTheStoreCannotSay(t *testing.T) {
	tr := &OwnerTracker{}
	for _, tc := range []struct {
		name  string
		store versionedStore
		want  int
	}{
		{"store with a version", versionStore{rv: "7"}, 0},
		{"store without a version", versionStore{}, 1},
		{"multi-namespace informer", nil, 1000},
	} {
		k := &ownerKind{}
		f := &kindForm{store: tc.store, oneStream: tc.store != nil, seen: map[string]string{}}
		for i := range 1000 {
			tr.observe(k, f, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Namespace: fmt.Sprintf("ns-%d", i), Name: "s", ResourceVersion: fmt.Sprint(i + 1),
			}}, false)
		}
		if got := len(f.seen); got != tc.want {
			t.Errorf("%s: %d namespaces remembered, want %d", tc.name, got, tc.want)
		}
		if tc.store != nil && tc.want == 1 {
			if got := f.version("ns-0"); got != "1000" {
				t.Errorf("%s: version in ns-0 = %q, want the stream's 1000", tc.name, got)
			}
		}
	}
}
