package racetest_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/racesafe/racesafe/racetest"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// trackedBody is a server's response body that knows whether it was closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// stream is a fake API server: every watch gets events, framed as
// contentType; the others get an empty list.
type stream struct {
	contentType string
	events      [][]byte // framed
	sent        int      // requests that reached the server
	bodies      []*trackedBody
}

func jsonEvents(n int) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, fmt.Appendf(nil, `{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"%d","annotations":{"a":"x\ny"}}}}`+"\n", i+1))
	}
	return out
}

func protobufEvents(n int) [][]byte {
	var out [][]byte
	for i := range n {
		payload := append([]byte("\n"), bytes.Repeat([]byte{byte(i)}, 10+i)...) // a newline must not end the frame
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
		out = append(out, append(frame, payload...))
	}
	return out
}

func (s *stream) client(t *testing.T, wf *racetest.WatchFaults) *http.Client {
	t.Helper()
	cfg := &rest.Config{Host: "http://api.invalid", Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		s.sent++
		body := &trackedBody{Reader: bytes.NewReader(slices.Concat(s.events...))}
		if r.URL.Query().Get("watch") != "true" {
			body.Reader = strings.NewReader(`{"items":[]}`)
		}
		s.bodies = append(s.bodies, body)
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {s.contentType}}, Body: body, Request: r}, nil
	})}
	hc, err := rest.HTTPClientFor(wf.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

func get(t *testing.T, hc *http.Client, path string) *http.Response {
	t.Helper()
	resp, err := hc.Get("http://api.invalid" + path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

const watchPath = "/api/v1/namespaces/ns/configmaps?watch=true"

func newWatchFaults(t *testing.T, opts racetest.WatchFaultOptions) *racetest.WatchFaults {
	t.Helper()
	wf, err := racetest.NewWatchFaults(opts)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func TestBreakEndsTheStreamAfterAWholeEvent(t *testing.T) {
	for name, s := range map[string]*stream{
		"json":     {contentType: "application/json;stream=watch", events: jsonEvents(5)},
		"protobuf": {contentType: "application/vnd.kubernetes.protobuf;stream=watch", events: protobufEvents(5)},
	} {
		t.Run(name, func(t *testing.T) {
			wf := newWatchFaults(t, racetest.WatchFaultOptions{Break: 1})
			hc := s.client(t, wf)
			got, err := io.ReadAll(get(t, hc, watchPath+"&resourceVersion=3").Body)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("the stream ended with %v, want io.ErrUnexpectedEOF", err)
			}
			if !bytes.Equal(got, s.events[0]) {
				t.Errorf("the stream delivered %q, want exactly the first event %q", got, s.events[0])
			}
			if !s.bodies[0].closed.Load() {
				t.Error("the server's stream was not closed at the break")
			}
			counts := wf.Counts()
			if counts.Broken["configmaps"] != 1 || counts.Watches["configmaps"] != 1 {
				t.Errorf("Counts() = %+v, want one watch, broken once", counts)
			}
		})
	}
}

func TestGoneAnswersTheResumptionOfABrokenWatch(t *testing.T) {
	wf := newWatchFaults(t, racetest.WatchFaultOptions{Break: 1, Gone: 1, Limit: 2})
	s := &stream{contentType: "application/json", events: jsonEvents(3)}
	hc := s.client(t, wf)

	// Not after a break, a resumption is sent; this one breaks.
	_, _ = io.ReadAll(get(t, hc, watchPath+"&resourceVersion=1").Body) // breaks
	if s.sent != 1 {
		t.Fatalf("%d requests reached the server, want 1", s.sent)
	}
	// Lists are never answered 410, nor changed; nor are watches that list
	// (their body is not read here, so they do not break).
	list := get(t, hc, "/api/v1/namespaces/ns/configmaps?resourceVersion=1")
	if body, err := io.ReadAll(list.Body); list.StatusCode != http.StatusOK || err != nil || string(body) != `{"items":[]}` {
		t.Errorf("list after a break: %d %q %v, want the server's answer", list.StatusCode, body, err)
	}
	_ = get(t, hc, watchPath+"&resourceVersion=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
	resp := get(t, hc, watchPath+"&resourceVersion=1")
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("the resumption after the break got %d, want 410", resp.StatusCode)
	}
	var status metav1.Status
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil {
		t.Fatal(err)
	}
	if err := (&apierrors.StatusError{ErrStatus: status}); !apierrors.IsResourceExpired(err) || status.Code != http.StatusGone {
		t.Errorf("410 body %+v: want reason Expired, code 410", status)
	}
	if !strings.Contains(status.Message, "too old resource version: 1") {
		t.Errorf("410 message %q, want the API server's", status.Message)
	}
	if s.sent != 3 {
		t.Errorf("%d requests reached the server, want 3: the 410 is answered without sending", s.sent)
	}
	// Once: the next resumption passes, and Limit is reached.
	if resp := get(t, hc, watchPath+"&resourceVersion=2"); resp.StatusCode != http.StatusOK {
		t.Errorf("the second resumption got %d, want 200", resp.StatusCode)
	}
	want := racetest.WatchFaultCounts{
		Watches: map[string]int{"configmaps": 4},
		Lists:   map[string]int{"configmaps": 2},
		Broken:  map[string]int{"configmaps": 1},
		Gone:    map[string]int{"configmaps": 1},
	}
	if got := wf.Counts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Counts() = %+v, want %+v", got, want)
	}
}

// breaks reads a 60-event history through watches that resume after each
// break, and returns the events after which they broke.
func breaks(t *testing.T, seed uint64) []int {
	t.Helper()
	wf := newWatchFaults(t, racetest.WatchFaultOptions{Seed: seed, Break: 0.1})
	all := jsonEvents(60)
	s := &stream{contentType: "application/json"}
	hc := s.client(t, wf)
	var out []int
	for seen := 0; seen < len(all); {
		s.events = all[seen:]
		got, err := io.ReadAll(get(t, hc, fmt.Sprintf("%s&resourceVersion=%d", watchPath, seen)).Body)
		seen += bytes.Count(got, []byte("\n"))
		if errors.Is(err, io.ErrUnexpectedEOF) {
			out = append(out, seen)
		}
	}
	return out
}

func TestWatchFaultsSameSeedSameBreaks(t *testing.T) {
	a := breaks(t, 42)
	if len(a) == 0 {
		t.Fatal("seed 42 broke no watch in 60 events at rate 0.1")
	}
	if b := breaks(t, 42); !slices.Equal(a, b) {
		t.Fatalf("seed 42 broke after events %v, then %v", a, b)
	}
	if c := breaks(t, 43); slices.Equal(a, c) {
		t.Fatalf("seeds 42 and 43 both broke after events %v: the seed is ignored", a)
	}
}

func TestWatchFaultsMatchAndLimit(t *testing.T) {
	var on atomic.Bool
	wf := newWatchFaults(t, racetest.WatchFaultOptions{Break: 1, Limit: 1, Match: func(r racetest.Request) bool {
		return on.Load() && r.Resource == "configmaps"
	}})
	s := &stream{contentType: "application/json", events: jsonEvents(3)}
	hc := s.client(t, wf)
	whole := slices.Concat(s.events...)
	if got, err := io.ReadAll(get(t, hc, watchPath).Body); err != nil || !bytes.Equal(got, whole) {
		t.Errorf("with Match off the stream gave %q, %v; want it whole", got, err)
	}
	on.Store(true)
	if got, err := io.ReadAll(get(t, hc, "/api/v1/namespaces/ns/secrets?watch=true").Body); err != nil || !bytes.Equal(got, whole) {
		t.Errorf("a watch Match rejects gave %q, %v; want it whole", got, err)
	}
	if _, err := io.ReadAll(get(t, hc, watchPath).Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("with Match on the stream ended with %v, want a break", err)
	}
	if got, err := io.ReadAll(get(t, hc, watchPath).Body); err != nil || !bytes.Equal(got, whole) {
		t.Errorf("after Limit the stream gave %q, %v; want it whole", got, err)
	}
}

func TestBrokenWatchPassesWhatItCannotFrame(t *testing.T) {
	wf := newWatchFaults(t, racetest.WatchFaultOptions{Break: 1})
	s := &stream{contentType: "application/cbor-seq", events: [][]byte{{0xa1, 0x01, 0x02}, {0xa1, 0x03, 0x04}}}
	if got, err := io.ReadAll(get(t, s.client(t, wf), watchPath).Body); err != nil || !bytes.Equal(got, slices.Concat(s.events...)) {
		t.Errorf("a CBOR stream gave %q, %v; want it whole", got, err)
	}
	// A last event cut short by the server is handed on as it came.
	s = &stream{contentType: "application/json", events: [][]byte{[]byte(`{"type":"ADDED"`)}}
	if got, err := io.ReadAll(get(t, s.client(t, wf), watchPath).Body); err != nil || string(got) != `{"type":"ADDED"` {
		t.Errorf("a cut event gave %q, %v; want it as sent", got, err)
	}
	if n := wf.Counts().Broken["configmaps"]; n != 0 {
		t.Errorf("Broken = %d, want 0", n)
	}
}

func TestNewWatchFaultsRejectsInvalidOptions(t *testing.T) {
	for name, opts := range map[string]racetest.WatchFaultOptions{
		"negative rate":  {Break: -0.1},
		"rate above one": {Gone: 1.1},
		"NaN rate":       {Break: math.NaN()},
		"negative limit": {Limit: -1},
	} {
		t.Run(name, func(t *testing.T) {
			wf, err := racetest.NewWatchFaults(opts)
			var optsErr *racetest.WatchFaultOptionsError
			if wf != nil || !errors.Is(err, racetest.ErrInvalidFaultOptions) || !errors.As(err, &optsErr) {
				t.Fatalf("NewWatchFaults(%+v) = %v, %v; want nil and a *WatchFaultOptionsError", opts, wf, err)
			}
			if want := "WatchFaultOptions." + optsErr.Field + " = "; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name the field as %q", err, want)
			}
			var faultsErr *racetest.FaultOptionsError
			if errors.As(err, &faultsErr) {
				t.Error("errors.As took a WatchFaultOptions error for a FaultOptions one")
			}
		})
	}
}

// TestWatchFaultsConcurrentStreams reads many streams through one
// WatchFaults at once; run with -race.
func TestWatchFaultsConcurrentStreams(t *testing.T) {
	wf := newWatchFaults(t, racetest.WatchFaultOptions{Break: 0.2, Gone: 0.5})
	events := slices.Concat(jsonEvents(20)...)
	cfg := &rest.Config{Host: "http://api.invalid", Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(events)), Request: r}, nil
	})}
	hc, err := rest.HTTPClientFor(wf.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for i := range 8 {
		go func() {
			path := fmt.Sprintf("http://api.invalid/api/v1/namespaces/ns%d/configmaps?watch=true&resourceVersion=1", i)
			for range 20 {
				resp, err := hc.Get(path)
				if err != nil {
					done <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	counts := wf.Counts()
	if counts.Watches["configmaps"] != 160 || counts.Broken["configmaps"] == 0 || counts.Gone["configmaps"] == 0 {
		t.Errorf("Counts() = %+v, want 160 watches, some broken, some answered 410", counts)
	}
}
