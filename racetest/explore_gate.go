package racetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// viewGate holds the watch streams of chosen resources: while a resource
// is held, the bytes its watches read wait, in order, and everything behind
// them waits too, as when the watch of one resource lags. Releasing the
// resource lets the stream through as it was.
//
// It also breaks a resource's streams and makes the informer relist, as a
// broken connection does: the resuming watch is answered 410 Gone, and the
// relist is served either from the present (UnobservedState) or from an
// older snapshot, as a lagging API server serves it (TimeTravel).
type viewGate struct {
	mu      sync.Mutex
	held    map[string]chan struct{} // resource -> closed on release
	streams map[string]map[*gatedStream]bool
	// gone: the next watch of the resource that resumes from a
	// resourceVersion is answered 410.
	gone map[string]bool
	// snapshot: the next relist of the resource is served at this
	// resourceVersion.
	snapshot map[string]string
	// served is called when a relist was served from a snapshot.
	served func(resource, rv string)
}

func newViewGate() *viewGate {
	return &viewGate{
		held:     map[string]chan struct{}{},
		streams:  map[string]map[*gatedStream]bool{},
		gone:     map[string]bool{},
		snapshot: map[string]string{},
	}
}

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
	clear(g.gone)
	clear(g.snapshot)
}

// relist breaks the open watch streams of resource between reads, so that
// what they had read and not delivered is lost with the connection, and
// answers the watch that resumes 410 Gone: the informer lists again. With
// a snapshot, that list is served at resourceVersion snapshot.
func (g *viewGate) relist(resource, snapshot string) {
	g.mu.Lock()
	g.gone[resource] = true
	if snapshot != "" {
		g.snapshot[resource] = snapshot
	}
	var open []*gatedStream
	for s := range g.streams[resource] {
		open = append(open, s)
	}
	g.mu.Unlock()
	for _, s := range open {
		s.breakStream()
	}
}

// wait blocks while resource is held; false if the stream ended first.
func (g *viewGate) wait(resource string, ended <-chan struct{}) bool {
	for {
		g.mu.Lock()
		ch := g.held[resource]
		g.mu.Unlock()
		if ch == nil {
			return true
		}
		select {
		case <-ch:
		case <-ended:
			return false
		}
	}
}

func (g *viewGate) wrap(next http.RoundTripper) http.RoundTripper {
	return &gateTransport{wrapping: wrapping{next}, gate: g}
}

type gateTransport struct {
	wrapping
	gate *viewGate
}

func (t *gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	lw, ok := asListWatch(req)
	if !ok {
		return t.next.RoundTrip(req)
	}
	r, initial, rv := lw.Request, lw.initial, lw.rv
	q := req.URL.Query()
	g := t.gate
	g.mu.Lock()
	gone := lw.resumes() && g.gone[r.Resource]
	if gone {
		delete(g.gone, r.Resource)
	}
	snapshot := g.snapshot[r.Resource]
	served := g.served
	g.mu.Unlock()
	switch {
	case gone:
		return goneResponse(req, rv)
	case snapshot != "" && r.Verb == "watch" && initial:
		// A streamed list (WatchList) cannot be asked for an exact older
		// resourceVersion; refused, the reflector falls back to a list,
		// which can.
		return statusResponse(req, apierrors.NewBadRequest("racetest explore: streamed list refused, list instead").ErrStatus)
	case snapshot != "" && r.Verb == "list" && q.Get("continue") == "":
		q.Set("resourceVersion", snapshot)
		q.Set("resourceVersionMatch", string(metav1.ResourceVersionMatchExact))
		req = req.Clone(req.Context())
		req.URL.RawQuery = q.Encode()
		resp, err := t.next.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			g.mu.Lock()
			if g.snapshot[r.Resource] == snapshot {
				delete(g.snapshot, r.Resource)
			}
			g.mu.Unlock()
			if served != nil {
				served(r.Resource, snapshot)
			}
		}
		return resp, err
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || r.Verb != "watch" {
		return resp, err
	}
	s := &gatedStream{ReadCloser: resp.Body, gate: g, resource: r.Resource, ended: make(chan struct{}), broken: make(chan struct{})}
	g.mu.Lock()
	if g.streams[r.Resource] == nil {
		g.streams[r.Resource] = map[*gatedStream]bool{}
	}
	g.streams[r.Resource][s] = true
	g.mu.Unlock()
	resp.Body = s
	return resp, nil
}

// statusResponse answers req with status, as the API server does.
func statusResponse(req *http.Request, status metav1.Status) (*http.Response, error) {
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, err := json.Marshal(&status)
	if err != nil {
		return nil, fmt.Errorf("racetest: encode status: %w", err)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status.Code, http.StatusText(int(status.Code))),
		StatusCode:    int(status.Code),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": []string{runtime.ContentTypeJSON}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

type gatedStream struct {
	io.ReadCloser
	gate      *viewGate
	resource  string
	ended     chan struct{} // closed by Close or a break
	broken    chan struct{}
	closeOnce sync.Once
	breakOnce sync.Once
}

// errStreamBroken ends a stream the gate broke: client-go reads an
// unexpected EOF as a connection that went away, and watches again.
var errStreamBroken = io.ErrUnexpectedEOF

// Read holds what it read while the resource is held: it was read from the
// server, and reaches the informer only on release. A broken stream
// delivers nothing more, not even what it had read.
func (s *gatedStream) Read(p []byte) (int, error) {
	select {
	case <-s.broken:
		return 0, errStreamBroken
	default:
	}
	n, err := s.ReadCloser.Read(p)
	if !s.gate.wait(s.resource, s.ended) {
		if s.isBroken() {
			return 0, errStreamBroken
		}
		return 0, io.ErrClosedPipe
	}
	if s.isBroken() {
		return 0, errStreamBroken
	}
	return n, err
}

func (s *gatedStream) isBroken() bool {
	select {
	case <-s.broken:
		return true
	default:
		return false
	}
}

// breakStream ends the stream: a Read waiting at the gate or on the server
// returns errStreamBroken.
func (s *gatedStream) breakStream() {
	s.breakOnce.Do(func() { close(s.broken) })
	s.end()
	_ = s.ReadCloser.Close()
}

func (s *gatedStream) end() {
	s.closeOnce.Do(func() {
		close(s.ended)
		s.gate.mu.Lock()
		delete(s.gate.streams[s.resource], s)
		s.gate.mu.Unlock()
	})
}

func (s *gatedStream) Close() error {
	s.end()
	return s.ReadCloser.Close()
}
