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
// informer's store gives the version; remembering every namespace an event
// was seen in would grow without bound as namespaces come and go.
func TestNamespaceVersionsAreKeptOnlyWhileTheStoreCannotSay(t *testing.T) {
	tr := &OwnerTracker{}
	for _, tc := range []struct {
		store string
		want  int
	}{{store: "7", want: 0}, {store: "", want: 1000}} {
		k := &ownerKind{}
		f := &kindForm{store: versionStore{rv: tc.store}, seen: map[string]string{}}
		for i := range 1000 {
			tr.observe(k, f, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Namespace: fmt.Sprintf("ns-%d", i), Name: "s", ResourceVersion: fmt.Sprint(i + 1),
			}}, false)
		}
		if got := len(f.seen); got != tc.want {
			t.Errorf("store version %q: %d namespaces remembered, want %d", tc.store, got, tc.want)
		}
	}
}
