package racetest

import (
	"io"
	"net/http"
	"sync"
)

// viewGate holds the watch streams of chosen resources: while a resource
// is held, the bytes its watches read wait, in order, and everything behind
// them waits too, as when the watch of one resource lags. Releasing the
// resource lets the stream through as it was.
type viewGate struct {
	mu   sync.Mutex
	held map[string]chan struct{} // resource -> closed on release
}

func newViewGate() *viewGate { return &viewGate{held: map[string]chan struct{}{}} }

func (g *viewGate) hold(resource string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[resource] == nil {
		g.held[resource] = make(chan struct{})
	}
}

func (g *viewGate) release(resource string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch := g.held[resource]; ch != nil {
		close(ch)
		delete(g.held, resource)
	}
}

func (g *viewGate) releaseAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for r, ch := range g.held {
		close(ch)
		delete(g.held, r)
	}
}

// wait blocks while resource is held; false if closed first.
func (g *viewGate) wait(resource string, closed <-chan struct{}) bool {
	for {
		g.mu.Lock()
		ch := g.held[resource]
		g.mu.Unlock()
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-closed:
			return false
		}
	}
}

func (g *viewGate) wrap(next http.RoundTripper) http.RoundTripper {
	return &gateTransport{next: next, gate: g}
}

type gateTransport struct {
	next http.RoundTripper
	gate *viewGate
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (t *gateTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	r := Classify(req.Method, req.URL)
	if r.Verb != "watch" {
		return resp, nil
	}
	resp.Body = &gatedStream{ReadCloser: resp.Body, gate: t.gate, resource: r.Resource, closed: make(chan struct{})}
	return resp, nil
}

type gatedStream struct {
	io.ReadCloser
	gate      *viewGate
	resource  string
	closed    chan struct{}
	closeOnce sync.Once
}

// Read holds what it read while the resource is held: it was read from the
// server, and reaches the informer only on release.
func (s *gatedStream) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if !s.gate.wait(s.resource, s.closed) {
		return 0, io.ErrClosedPipe
	}
	return n, err
}

func (s *gatedStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.ReadCloser.Close()
}
