package racetest

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

type okTransport struct{ sent int }

func (t *okTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.sent++
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// A crashed replica sends nothing but events.
func TestCrashTransportCutsAllButEvents(t *testing.T) {
	next := &okTransport{}
	var crashed atomic.Bool
	rt := &crashTransport{next: next, crashed: &crashed}
	send := func(method, url string) error {
		req, err := http.NewRequest(method, url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	lease := "https://h/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"
	if err := send(http.MethodPut, lease); err != nil {
		t.Fatalf("before the crash: %v", err)
	}
	crashed.Store(true)
	for _, u := range []string{lease, "https://h/api/v1/namespaces/ns/configmaps/c", "https://h/api/v1/namespaces/ns/configmaps?watch=true"} {
		if err := send(http.MethodPut, u); !errors.Is(err, ErrReplicaCrashed) {
			t.Errorf("PUT %s after the crash: %v, want ErrReplicaCrashed", u, err)
		}
	}
	for _, u := range []string{"https://h/api/v1/namespaces/ns/events", "https://h/apis/events.k8s.io/v1/namespaces/ns/events"} {
		if err := send(http.MethodPost, u); err != nil {
			t.Errorf("POST %s after the crash: %v, want it sent", u, err)
		}
	}
	if next.sent != 3 {
		t.Errorf("%d requests reached the server, want 3: the one before the crash and the events", next.sent)
	}
}
