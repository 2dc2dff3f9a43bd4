package expectations

import (
	"hash/maphash"
	"sync/atomic"
	"time"
	"unsafe"

	"k8s.io/utils/clock"
)

// keyHash is an objectKey's hash, computed once per call: it picks the
// shard, and it is the key of the shard's map, so that the map hashes one
// word rather than the key's two strings again.
type keyHash uint64

// hashKey hashes k with the tracker's seed. maphash.String is the runtime's
// own string hash (AES-based where the CPU has it): a few nanoseconds for a
// name, where the byte-at-a-time FNV loop it replaced cost more than the
// map lookup itself.
func hashKey(seed maphash.Seed, k objectKey) keyHash {
	h := maphash.String(seed, k.Name)
	h ^= maphash.String(seed, k.Namespace) * 0x9e3779b97f4a7c15
	h ^= uint64(k.kind) * 0xc2b2ae3d27d4eb4f
	return keyHash(h)
}

// table maps objectKeys to expectations through their 64-bit hash. Two keys
// with one hash cannot both live in byHash: the later one goes to spill,
// keyed by the whole key. With a random seed a collision is all but
// impossible, but it must be correct, not assumed away. A key is in at most
// one of the two maps.
//
// The maps hold pointers, so that a lookup copies one word rather than the
// whole entry, and a write to a key already present updates it in place
// without allocating. The caller holds the shard's lock: readers the read
// lock, writers the write lock, so a slot is never read while it changes.
//
// A dropped slot is kept for the next new key, up to freeSlots of them, so
// that a controller that writes, sees and forgets objects in turn does not
// allocate on each write.
type table struct {
	byHash map[keyHash]*slot
	spill  map[objectKey]*slot
	free   []*slot
}

const freeSlots = 4

type slot struct {
	key objectKey
	e   expectation
	// stale is the last *StaleError a check of this key returned
	// (Tracker.staleError). It is written under the read lock, hence atomic.
	stale atomic.Pointer[StaleError]
}

func newTable() table { return table{byHash: make(map[keyHash]*slot)} }

// find returns k's slot, or nil. The slot may be read while the shard's
// lock is held, and written while its write lock is.
func (t *table) find(h keyHash, k objectKey) *slot {
	if s := t.byHash[h]; s != nil && s.key == k {
		return s
	}
	if len(t.spill) == 0 {
		return nil
	}
	return t.spill[k]
}

func (t *table) get(h keyHash, k objectKey) (expectation, bool) {
	if s := t.find(h, k); s != nil {
		return s.e, true
	}
	return expectation{}, false
}

func (t *table) put(h keyHash, k objectKey, e expectation) {
	if s := t.find(h, k); s != nil {
		s.e = e
		return
	}
	s := t.newSlot(k, e)
	if t.byHash[h] == nil {
		t.byHash[h] = s
		return
	}
	if t.spill == nil {
		t.spill = make(map[objectKey]*slot)
	}
	t.spill[k] = s
}

func (t *table) newSlot(k objectKey, e expectation) *slot {
	n := len(t.free)
	if n == 0 {
		return &slot{key: k, e: e}
	}
	s := t.free[n-1]
	t.free[n-1] = nil
	t.free = t.free[:n-1]
	s.key, s.e = k, e
	s.stale.Store(nil)
	return s
}

// release keeps s for reuse, its strings cleared so that it holds nothing
// of the object it named.
func (t *table) release(s *slot) {
	if len(t.free) < freeSlots {
		s.key, s.e = objectKey{}, expectation{}
		s.stale.Store(nil)
		t.free = append(t.free, s)
	}
}

func (t *table) del(h keyHash, k objectKey) {
	if s := t.byHash[h]; s != nil && s.key == k {
		delete(t.byHash, h)
		t.release(s)
		return
	}
	if s := t.spill[k]; s != nil {
		delete(t.spill, k)
		t.release(s)
	}
}

func (t *table) len() int { return len(t.byHash) + len(t.spill) }

// each calls f on every entry, and drops those for which it returns false.
func (t *table) each(f func(objectKey, expectation) (keep bool)) {
	for h, s := range t.byHash {
		if !f(s.key, s.e) {
			delete(t.byHash, h)
			t.release(s)
		}
	}
	for k, s := range t.spill {
		if !f(k, s.e) {
			delete(t.spill, k)
			t.release(s)
		}
	}
}

// nilPointer reports whether obj, not nil itself, holds a nil pointer: a
// typed nil whose accessor methods would panic. An interface's second word
// is the pointer it holds, for any pointer-shaped type; this is what
// reflect.Value.IsNil reads, without building a reflect.Value on every
// check.
func nilPointer(obj any) bool {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&obj))[1] == nil
}

// ticks is a time on a ticker: nanoseconds since the ticker was made. Eight
// bytes an entry, where a time.Time takes twenty-four.
type ticks int64

func (t ticks) sub(u ticks) time.Duration { return time.Duration(t - u) }

// ticker reads a clock.PassiveClock as ticks. On the real clock it reads
// only the monotonic clock (time.Since), which costs half of time.Now on the
// machines measured (docs/benchmarks.md); the check path reads it once.
type ticker struct {
	clock clock.PassiveClock
	real  bool
	epoch time.Time
}

func newTicker(c clock.PassiveClock) ticker {
	_, real := c.(clock.RealClock)
	return ticker{clock: c, real: real, epoch: c.Now()}
}

// at returns t on the ticker.
func (k ticker) at(t time.Time) ticks { return ticks(t.Sub(k.epoch)) }

func (k ticker) now() ticks {
	if k.real {
		return ticks(time.Since(k.epoch))
	}
	return ticks(k.clock.Now().Sub(k.epoch))
}
