package racetest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// LagOptions configure how late watch responses reach the client. The zero
// value lags nothing: every watch chunk is released as soon as it arrives.
type LagOptions struct {
	// Delay is how long each chunk of a watch response is held after it was
	// read from the server. A negative Delay counts as zero.
	Delay time.Duration

	// Jitter, if set, is called once per chunk and its result is added to
	// Delay for that chunk. A chunk is never released before the one read
	// before it, so jitter stretches the lag but never reorders events. A total
	// below zero counts as zero. Jitter may be called from several goroutines
	// at once (one per open watch); it must be safe for that.
	Jitter func() time.Duration

	// Match, if set, selects the watch requests to lag; the others pass
	// unchanged. It receives the request as [Classify] sees it, so
	// Match: func(r racetest.Request) bool { return r.Resource == "workitems" }
	// lags only the WorkItem informer.
	Match func(Request) bool

	// Clock is the source of time for release deadlines; nil means the real
	// clock. Tests of the lag itself inject a fake clock here.
	Clock clock.Clock

	// WatchFaults, if set, also breaks the watches, between the server and
	// the lag: a stream ends, or a resumption is answered 410 Gone, when the
	// server side of the lag reaches that point, and the client learns of it
	// Delay later, as it learns of every event.
	WatchFaults *WatchFaults
}

// WithWatchLag returns a copy of cfg whose watch responses reach the client
// opts.Delay after the client read them from the server. Requests that are not
// watches (gets, lists, writes, discovery) pass unchanged, and so does the
// status line of a watch: only its body is held back. cfg itself is not
// modified; it must not be nil.
//
// With client-go's WatchList feature on (the default since v0.35), an
// informer's initial list arrives as a watch with sendInitialEvents=true, so
// the initial sync is delayed too. With KUBE_FEATURE_WatchListClient=false it
// is a plain list and is not delayed; the events after it are.
//
// For a manager's cache use [LaggedCache]: the manager hands its cache an
// HTTP client built from the unlagged config, which would bypass the lag.
func WithWatchLag(cfg *rest.Config, opts LagOptions) *rest.Config {
	lagged := rest.CopyConfig(cfg)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.WatchFaults != nil {
		lagged.Wrap(opts.WatchFaults.wrap)
	}
	lagged.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &lagTransport{wrapping: wrapping{rt}, opts: opts}
	})
	return lagged
}

// LaggedCache returns a [cache.NewCacheFunc] for manager.Options.NewCache
// whose informers see watch events opts.Delay late, while the manager's client
// still writes straight to the server: the window of the incident, made wide.
//
// It replaces the HTTPClient the manager passes in, because that client was
// built from the unlagged config and would carry the watches past the lag.
func LaggedCache(opts LagOptions) cache.NewCacheFunc {
	return func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
		lagged := WithWatchLag(cfg, opts)
		hc, err := rest.HTTPClientFor(lagged)
		if err != nil {
			return nil, fmt.Errorf("http client for lagged config: %w", err)
		}
		o.HTTPClient = hc
		return cache.New(lagged, o)
	}
}

// lagTransport delays the bodies of watch responses.
type lagTransport struct {
	wrapping
	opts LagOptions
}

// RoundTrip implements http.RoundTripper.
func (t *lagTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		// A refused watch is an answer, not an event: pass it at once.
		return resp, err
	}
	r := Classify(req.Method, req.URL)
	if r.Verb != "watch" || (t.opts.Match != nil && !t.opts.Match(r)) {
		return resp, nil
	}
	resp.Body = newLagBody(resp.Body, t.opts)
	return resp, nil
}

// errBodyClosed is returned by Read after Close, like net/http does.
var errBodyClosed = errors.New("racetest: read on closed lagged watch body")

// lagChunkQueue bounds how many chunks wait for release. When it is full the
// pump stops reading from the server, so a consumer slower than the stream
// adds to the lag (a chunk is stamped when read) but never to memory use.
const lagChunkQueue = 1024

// chunk is what one Read from the server returned, and when it may go on.
type chunk struct {
	data    []byte
	err     error // set on the last chunk: the error that ended the stream
	release time.Time
}

// lagBody holds each chunk read from the server until its release time.
//
// A pump goroutine reads the server's body and stamps each chunk with its
// release time; Read waits for that time. The pump ends when the server's body
// fails or ends (its error travels, lagged, as the last chunk) or when Close
// is called, which closes the server's body and so unblocks the pump's Read.
type lagBody struct {
	src    io.ReadCloser
	opts   LagOptions
	chunks chan chunk
	done   chan struct{}
	once   sync.Once
	exited chan struct{} // closed when pump returns

	// Read's state; Read is not called concurrently with itself.
	rest []byte
	err  error
}

func newLagBody(src io.ReadCloser, opts LagOptions) *lagBody {
	b := &lagBody{
		src:    src,
		opts:   opts,
		chunks: make(chan chunk, lagChunkQueue),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	go b.pump()
	return b
}

func (b *lagBody) delay() time.Duration {
	d := b.opts.Delay
	if b.opts.Jitter != nil {
		d += b.opts.Jitter()
	}
	return max(d, 0)
}

func (b *lagBody) pump() {
	defer close(b.exited)
	buf := make([]byte, 32<<10)
	var last time.Time
	for {
		n, err := b.src.Read(buf)
		// Never before the chunk read before: jitter must not reorder.
		release := b.opts.Clock.Now().Add(b.delay())
		if release.Before(last) {
			release = last
		}
		last = release
		if n > 0 {
			if !b.send(chunk{data: append([]byte(nil), buf[:n]...), release: release}) {
				return
			}
		}
		if err != nil {
			b.send(chunk{err: err, release: release})
			return
		}
	}
}

// send queues c, or reports false once the body is closed.
func (b *lagBody) send(c chunk) bool {
	select {
	case b.chunks <- c:
		return true
	case <-b.done:
		return false
	}
}

// Read implements io.Reader.
func (b *lagBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(b.rest) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		var c chunk
		select {
		case c = <-b.chunks:
		case <-b.done:
			return 0, errBodyClosed
		}
		if wait := c.release.Sub(b.opts.Clock.Now()); wait > 0 {
			t := b.opts.Clock.NewTimer(wait)
			select {
			case <-t.C():
			case <-b.done:
				t.Stop()
				return 0, errBodyClosed
			}
		}
		b.rest, b.err = c.data, c.err
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// Close implements io.Closer. It unblocks a pending Read and ends the pump;
// closing twice is a no-op.
func (b *lagBody) Close() error {
	var err error
	b.once.Do(func() {
		close(b.done)
		err = b.src.Close()
	})
	return err
}
