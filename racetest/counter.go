package racetest

import (
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Request is an API request as Kubernetes authorisation names it.
type Request struct {
	// Verb is get, list, watch, create, update, patch, delete,
	// deletecollection or proxy. For a non-resource request, or a method
	// Kubernetes has no verb for, it is the lower-cased method.
	Verb string
	// Resource is the plural resource, followed by "/" and the subresource
	// if there is one: "pods", "workitems/status". The API group is not part
	// of it. Empty for non-resource requests.
	Resource string
	// Path is the URL path of a non-resource request (discovery, /version,
	// /healthz); empty for resource requests.
	Path string
}

// Classify names the request a client sends with method to u, the way the API
// server's request info does: a GET of a named object is a get, of a
// collection a list, and with watch=true (or the legacy /watch/ path) a
// watch; a DELETE of a collection is a deletecollection. Paths are
// /api/v1/... and /apis/<group>/<version>/..., optionally
// namespaces/<ns>/ before <resource>/<name>/<subresource>. Anything else,
// and the group and version discovery paths themselves, are non-resource
// requests.
//
// Unlike the API server, a GET of a named object with watch=true is a watch
// too: that is what it is on the wire.
func Classify(method string, u *url.URL) Request {
	path := u.Path
	nonResource := Request{Verb: strings.ToLower(method), Path: path}
	parts := splitPath(path)
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api, version
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis, group, version
	default:
		return nonResource
	}
	if len(parts) == 0 {
		return nonResource
	}

	var verb string
	if parts[0] == "watch" || parts[0] == "proxy" {
		verb, parts = parts[0], parts[1:]
		if len(parts) == 0 {
			return nonResource
		}
	}
	if parts[0] == "namespaces" && len(parts) > 2 && !namespaceSubresource(parts[2]) {
		// namespaces/<ns>/<resource>/...; but namespaces/<ns>/status is the
		// namespace's own subresource.
		parts = parts[2:]
	}

	resource := parts[0]
	name := ""
	if len(parts) >= 2 {
		name = parts[1]
	}
	if len(parts) >= 3 && verb != "proxy" {
		resource += "/" + parts[2]
	}

	if verb == "" {
		verb = methodVerb(method)
		switch {
		case (verb == "get" || verb == "list") && isWatchQuery(u.Query()):
			verb = "watch"
		case verb == "get" && name == "":
			verb = "list"
		case verb == "delete" && name == "":
			verb = "deletecollection"
		}
	}
	return Request{Verb: verb, Resource: resource}
}

func splitPath(path string) []string {
	var parts []string
	for p := range strings.SplitSeq(strings.Trim(path, "/"), "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// namespaceSubresource reports whether s, after namespaces/<ns>/, is a
// subresource of the namespace rather than a namespaced resource.
func namespaceSubresource(s string) bool {
	return s == "status" || s == "finalize"
}

func methodVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	default:
		return strings.ToLower(method)
	}
}

func isWatchQuery(q url.Values) bool {
	w, err := strconv.ParseBool(q.Get("watch"))
	return err == nil && w
}

// Counter counts the requests a client sends, by [Request]. Each attempt is
// counted when it is sent, whatever its outcome, so a request client-go
// retries counts once per attempt. The zero value is ready to use; a Counter
// is safe for concurrent use.
type Counter struct {
	mu     sync.Mutex
	counts map[Request]int
}

// CountRequests returns a copy of cfg whose requests are counted by the
// returned Counter. cfg itself is not modified; it must not be nil.
func CountRequests(cfg *rest.Config) (*rest.Config, *Counter) {
	c := &Counter{}
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{wrapping: wrapping{rt}, counter: c}
	})
	return counted, c
}

func (c *Counter) add(r Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[Request]int{}
	}
	c.counts[r]++
}

// Snapshot returns the counts so far; the map is the caller's.
func (c *Counter) Snapshot() map[Request]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.counts)
	if out == nil {
		out = map[Request]int{}
	}
	return out
}

// Count returns how many resource requests with verb on resource (for
// example "patch", "workitems/status") were sent.
func (c *Counter) Count(verb, resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[Request{Verb: verb, Resource: resource}]
}

// Total returns how many requests were sent, non-resource ones included.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Reset forgets all counts, for example after setup and before the
// transition a benchmark measures.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}

// wrapping is the transport underneath one of racetest's transports.
// Embedded, it gives that transport WrappedRoundTripper, through which
// client-go's utilnet.CloseIdleConnectionsFor reaches the connections
// underneath: without it their goroutines outlive the test.
type wrapping struct {
	next http.RoundTripper
}

// WrappedRoundTripper returns the transport underneath.
func (w wrapping) WrappedRoundTripper() http.RoundTripper { return w.next }

type countingTransport struct {
	wrapping
	counter *Counter
}

// RoundTrip implements http.RoundTripper.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.counter.add(Classify(req.Method, req.URL))
	return t.next.RoundTrip(req)
}
