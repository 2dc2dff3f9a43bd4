package racetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// WatchFaultOptions configure [NewWatchFaults]. Rates are probabilities, each
// in [0, 1].
type WatchFaultOptions struct {
	// Seed makes the faults replayable: the same seed and the same sequence
	// of watch events and requests give the same faults.
	Seed uint64

	// Break is the rate, per event a watch stream delivers (bookmarks
	// included), at which the stream ends right after that event, as when
	// the connection is reset: the body's next Read returns
	// io.ErrUnexpectedEOF and the server's stream is closed. The client
	// watches again from the last resourceVersion it saw.
	Break float64

	// Gone is the rate at which the first watch that resumes from a
	// resourceVersion after a broken stream (same path: resource and
	// namespace) is answered 410 Gone, reason Expired, "too old resource
	// version", instead of being sent: the window of events it asks for is
	// gone, and the client must list again.
	Gone float64

	// Limit, if positive, bounds the faults injected, breaks and 410s
	// together; after it, watches pass unharmed.
	Limit int

	// Match, if set, selects where faults may happen. It is asked with the
	// watch request, as [Classify] names it, before every draw: at every
	// event of a stream and at every resuming watch. A test can turn faults
	// on mid-stream with it. A draw it rejects is not made, so it does not
	// shift the replayed sequence.
	Match func(Request) bool
}

// WatchFaultOptionsError says which field of [WatchFaultOptions] is invalid,
// with the fields of a [FaultOptionsError]: a type of its own, so that
// errors.As tells which options were refused.
// errors.Is(err, ErrInvalidFaultOptions) is true.
type WatchFaultOptionsError FaultOptionsError

// Error implements error.
func (e *WatchFaultOptionsError) Error() string {
	return (*FaultOptionsError)(e).message("WatchFaultOptions.")
}

// Is makes errors.Is(err, ErrInvalidFaultOptions) true.
func (e *WatchFaultOptionsError) Is(target error) bool { return target == ErrInvalidFaultOptions }

// WatchFaults breaks watch streams, seeded, on the transport of a
// *rest.Config: streams that end mid-burst and resumptions answered 410
// Gone. Build the cache on [WatchFaults.Config], or give a manager
// [WatchFaults.NewCache]; [WatchFaultCounts] tells what happened, so a test
// can see that a fault occurred and that the informer recovered.
//
// A WatchFaults is safe for concurrent use. Draws come from one source in
// the order events and requests reach it, so a replay is exact when they
// come in the same order: one informer, selected with Match.
//
// Only JSON and protobuf watch streams are broken, the formats client-go
// and controller-runtime ask for; a stream of another format passes.
type WatchFaults struct {
	opts WatchFaultOptions

	mu      sync.Mutex
	rng     *rand.Rand
	faults  int
	pending map[string]bool // watch paths whose stream was broken and not yet resumed
	counts  WatchFaultCounts
}

// WatchFaultCounts is what a WatchFaults saw and did, by resource as
// [Classify] names it ("configmaps", "workitems").
type WatchFaultCounts struct {
	// Watches counts the watch requests, faulted or not.
	Watches map[string]int
	// Lists counts the requests that read a resource's whole state: lists,
	// and watches with sendInitialEvents=true (client-go's WatchList). An
	// informer makes one to sync; every other one is a relist.
	Lists map[string]int
	// Broken counts the streams Break ended.
	Broken map[string]int
	// Gone counts the watches answered 410 Gone.
	Gone map[string]int
}

func (c WatchFaultCounts) clone() WatchFaultCounts {
	return WatchFaultCounts{
		Watches: maps.Clone(c.Watches), Lists: maps.Clone(c.Lists),
		Broken: maps.Clone(c.Broken), Gone: maps.Clone(c.Gone),
	}
}

// NewWatchFaults validates opts and returns a WatchFaults for them.
func NewWatchFaults(opts WatchFaultOptions) (*WatchFaults, error) {
	for _, r := range []struct {
		field string
		rate  float64
	}{{"Break", opts.Break}, {"Gone", opts.Gone}} {
		if math.IsNaN(r.rate) || r.rate < 0 || r.rate > 1 {
			return nil, &WatchFaultOptionsError{Field: r.field, Value: r.rate, Reason: "a rate must be in [0, 1]"}
		}
	}
	if opts.Limit < 0 {
		return nil, &WatchFaultOptionsError{Field: "Limit", Value: opts.Limit, Reason: "must not be negative"}
	}
	return &WatchFaults{
		opts:    opts,
		rng:     rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)),
		pending: map[string]bool{},
		counts:  WatchFaultCounts{Watches: map[string]int{}, Lists: map[string]int{}, Broken: map[string]int{}, Gone: map[string]int{}},
	}, nil
}

// Counts returns a copy of the counts so far.
func (w *WatchFaults) Counts() WatchFaultCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts.clone()
}

// Config returns a copy of cfg whose watches w breaks. cfg itself is not
// modified; it must not be nil.
func (w *WatchFaults) Config(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(w.wrap)
	return out
}

func (w *WatchFaults) wrap(rt http.RoundTripper) http.RoundTripper {
	return &watchFaultTransport{wrapping: wrapping{rt}, faults: w}
}

// NewCache is a [cache.NewCacheFunc] for manager.Options.NewCache: the
// manager's cache, with w breaking its informers' watches. It replaces the
// HTTPClient the manager passes in, which would bypass the faults. To lag
// the watches too, set [LagOptions].WatchFaults and use [LaggedCache].
func (w *WatchFaults) NewCache(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
	broken := w.Config(cfg)
	hc, err := rest.HTTPClientFor(broken)
	if err != nil {
		return nil, fmt.Errorf("http client for broken watches: %w", err)
	}
	o.HTTPClient = hc
	return cache.New(broken, o)
}

// draw reports whether a fault of rate happens for r, counting it in
// counts.
func (w *WatchFaults) draw(r Request, rate float64, counts map[string]int) bool {
	if rate == 0 || (w.opts.Match != nil && !w.opts.Match(r)) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opts.Limit > 0 && w.faults >= w.opts.Limit {
		return false
	}
	if w.rng.Float64() >= rate {
		return false
	}
	w.faults++
	counts[r.Resource]++
	return true
}

// breakAfterEvent decides whether the stream of path ends after the event
// it just delivered.
func (w *WatchFaults) breakAfterEvent(r Request, path string) bool {
	if !w.draw(r, w.opts.Break, w.counts.Broken) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[path] = true
	return true
}

// gone decides whether a watch that resumes on path is answered 410.
func (w *WatchFaults) gone(r Request, path string) bool {
	w.mu.Lock()
	resumesBroken := w.pending[path]
	w.mu.Unlock()
	if !resumesBroken || w.opts.Match != nil && !w.opts.Match(r) {
		return false
	}
	w.mu.Lock()
	delete(w.pending, path)
	w.mu.Unlock()
	return w.draw(r, w.opts.Gone, w.counts.Gone)
}

func (w *WatchFaults) countRequest(r Request, lists bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Verb == "watch" {
		w.counts.Watches[r.Resource]++
	}
	if lists {
		w.counts.Lists[r.Resource]++
	}
}

type watchFaultTransport struct {
	wrapping
	faults *WatchFaults
}

// RoundTrip implements http.RoundTripper.
func (t *watchFaultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	lw, ok := asListWatch(req)
	if !ok {
		return t.next.RoundTrip(req)
	}
	r := lw.Request
	t.faults.countRequest(r, r.Verb == "list" || lw.initial)
	if r.Verb != "watch" {
		return t.next.RoundTrip(req)
	}
	if lw.resumes() && t.faults.gone(r, req.URL.Path) {
		return goneResponse(req, lw.rv)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	frame := frameLength(resp.Header.Get("Content-Type"))
	if frame == nil {
		return resp, nil
	}
	resp.Body = &breakingBody{src: resp.Body, frame: frame, faults: t.faults, req: r, path: req.URL.Path}
	return resp, nil
}

// listWatch is a list or watch request, as the transports that fault an
// informer's list and watch see it.
type listWatch struct {
	Request
	// initial: sendInitialEvents, a watch that starts with a list
	// (WatchList).
	initial bool
	// rv is the resourceVersion asked for.
	rv string
}

// asListWatch classifies req; false for a request that is neither a list
// nor a watch.
func asListWatch(req *http.Request) (listWatch, bool) {
	r := Classify(req.Method, req.URL)
	if r.Verb != "watch" && r.Verb != "list" {
		return listWatch{}, false
	}
	q := req.URL.Query()
	initial, _ := strconv.ParseBool(q.Get("sendInitialEvents"))
	return listWatch{Request: r, initial: initial, rv: q.Get("resourceVersion")}, true
}

// resumes reports whether the request is a watch from a resourceVersion
// the client already held: the one watch the API server answers 410 Gone
// when that version has left its window. "0" and "" ask for any version,
// and a watch with initial events starts from a list.
func (l listWatch) resumes() bool {
	return l.Verb == "watch" && !l.initial && l.rv != "" && l.rv != "0"
}

// goneResponse is the API server's answer to a watch from a
// resourceVersion older than its window.
func goneResponse(req *http.Request, rv string) (*http.Response, error) {
	return statusResponse(req, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s (injected by racetest)", rv)).ErrStatus)
}

// frameLength returns, for a watch stream of contentType, the function that
// tells the length of the first complete event in a buffer, or -1 if the
// buffer holds none yet; nil for a format it does not know.
func frameLength(contentType string) func([]byte) int {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil
	}
	switch mediaType {
	case runtime.ContentTypeJSON:
		// One JSON document a line: the API server's encoder ends each with
		// a newline and escapes the ones inside strings.
		return func(b []byte) int {
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				return i + 1
			}
			return -1
		}
	case runtime.ContentTypeProtobuf:
		// Length-delimited: a big-endian uint32, then the event.
		return func(b []byte) int {
			if len(b) < 4 {
				return -1
			}
			if n := 4 + int(binary.BigEndian.Uint32(b)); len(b) >= n {
				return n
			}
			return -1
		}
	default:
		return nil
	}
}

// breakingBody hands out a watch stream whole events at a time, and after
// each asks whether the stream breaks there.
type breakingBody struct {
	src    io.ReadCloser
	frame  func([]byte) int
	faults *WatchFaults
	req    Request
	path   string

	// Read's state; Read is not called concurrently with itself.
	buf    []byte
	in     []byte // read from src, not yet a whole event
	out    []byte // whole events, to hand out
	broken bool
	err    error // src's error, handed out after the events before it
}

// Read implements io.Reader.
func (b *breakingBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.buf == nil {
		b.buf = make([]byte, 32<<10)
	}
	for len(b.out) == 0 {
		switch {
		case b.broken:
			return 0, io.ErrUnexpectedEOF
		case b.err != nil:
			return 0, b.err
		}
		n, err := b.src.Read(b.buf)
		b.in = append(b.in, b.buf[:n]...)
		for !b.broken {
			size := b.frame(b.in)
			if size < 0 {
				break
			}
			b.out = append(b.out, b.in[:size]...)
			b.in = b.in[size:]
			if b.faults.breakAfterEvent(b.req, b.path) {
				b.broken = true
				b.in = nil
				_ = b.src.Close()
			}
		}
		if err != nil && !b.broken {
			// What is left is not a whole event: hand it on as the server
			// sent it, with its error.
			b.out = append(b.out, b.in...)
			b.in, b.err = nil, err
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// Close implements io.Closer.
func (b *breakingBody) Close() error { return b.src.Close() }
