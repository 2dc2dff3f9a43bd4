package expectations

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readBackInterval is how often a refused read tries again the read back
// of ambiguous writes whose first read back failed.
const readBackInterval = time.Second

// unresolvedWrite is an ambiguous write whose read back failed.
type unresolvedWrite struct {
	verb string
	obj  client.Object // a copy of what was sent
	gk   schema.GroupKind
	at   time.Time
}

// unresolvedWrites is the Client's list of them, safe for concurrent use.
type unresolvedWrites struct {
	mu sync.Mutex
	w  []unresolvedWrite
}

func (u *unresolvedWrites) add(w unresolvedWrite) {
	u.mu.Lock()
	u.w = append(u.w, w)
	u.mu.Unlock()
}

func (u *unresolvedWrites) empty() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.w) == 0
}

// forget drops the writes of obj's key (and, for a Create with
// generateName, of its generateName and controller): one read back told
// what all of them became.
func (u *unresolvedWrites) forget(obj client.Object) {
	u.mu.Lock()
	defer u.mu.Unlock()
	kept := u.w[:0]
	for _, w := range u.w {
		if !sameTarget(w.obj, obj) {
			kept = append(kept, w)
		}
	}
	clear(u.w[len(kept):])
	u.w = kept
}

// in reports whether a write of gk in namespace ns is unresolved.
func (u *unresolvedWrites) in(gk schema.GroupKind, ns string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, w := range u.w {
		if w.gk == gk && w.obj.GetNamespace() == ns {
			return true
		}
	}
	return false
}

// expire drops the writes older than ttl (their entries and barriers have
// gone with it) and returns a copy of the rest.
func (u *unresolvedWrites) expire(now time.Time, ttl time.Duration) []unresolvedWrite {
	u.mu.Lock()
	defer u.mu.Unlock()
	kept := u.w[:0]
	for _, w := range u.w {
		if now.Sub(w.at) < ttl {
			kept = append(kept, w)
		}
	}
	clear(u.w[len(kept):])
	u.w = kept
	return append([]unresolvedWrite(nil), kept...)
}

func sameTarget(a, b client.Object) bool {
	if a.GetNamespace() != b.GetNamespace() || a.GetName() != b.GetName() {
		return false
	}
	if a.GetName() != "" {
		return true
	}
	return a.GetGenerateName() == b.GetGenerateName()
}

type retriedKey struct{}

// withRetried marks a Get that has already retried the read backs, so it
// does not retry them again.
func withRetried(ctx context.Context) context.Context {
	return context.WithValue(ctx, retriedKey{}, true)
}

func retried(ctx context.Context) bool {
	v, _ := ctx.Value(retriedKey{}).(bool)
	return v
}
