package racetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ErrNotRestartable is matched by the errors of an environment whose API
// server an [APIServerRestarter] cannot restart as the same server.
var ErrNotRestartable = errors.New("API server not restartable")

// NotRestartableError says why an environment's API server cannot be
// restarted. errors.Is(err, ErrNotRestartable) is true.
type NotRestartableError struct {
	// Reason says what is missing.
	Reason string
	// Err, if set, is what showed it.
	Err error
}

// Error implements error.
func (e *NotRestartableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: %s: %v", ErrNotRestartable, e.Reason, e.Err)
	}
	return fmt.Sprintf("%v: %s", ErrNotRestartable, e.Reason)
}

// Is makes errors.Is(err, ErrNotRestartable) true.
func (e *NotRestartableError) Is(target error) bool { return target == ErrNotRestartable }

// Unwrap returns Err.
func (e *NotRestartableError) Unwrap() error { return e.Err }

// APIServerRestartOptions configure [NewAPIServerRestarter]. Zero durations
// take the defaults; negative ones are a [*RestartOptionsError].
type APIServerRestartOptions struct {
	// CertDir is the folder, a t.TempDir(), where the API server keeps its
	// certificates across restarts. envtest gives each start of an API
	// server whose CertDir it chose a fresh folder, and with it a new
	// serving CA that the rest.Config env.Start returned does not trust; a
	// folder of the caller's keeps them, so the restarted server is the
	// same server to every client. Its address is kept either way.
	// Required, unless env.ControlPlane.APIServer.CertDir is set.
	CertDir string
	// StopTimeout is how long a stop waits for kube-apiserver to exit
	// gracefully before envtest kills it; default 1s. Its graceful
	// shutdown, with watches open, can outlast even envtest's default of
	// 20s, so a stop is usually a kill: a crash rather than a clean stop, and as
	// good a fault. envtest fixes a process's stop timeout when it starts
	// it, from env.ControlPlaneStopTimeout, which NewAPIServerRestarter
	// sets: etcd's stop in env.Stop waits as long.
	StopTimeout time.Duration
	// Timeout bounds each wait of a restart: for the stopped server to
	// refuse a request, and for the started one to serve; default 60s.
	Timeout time.Duration
}

// RestartOptionsError says which field of [APIServerRestartOptions] is
// invalid (Field "APIServerRestartOptions.StopTimeout" and so on), with the
// fields of a [FaultOptionsError]: a type of its own, so that errors.As
// tells which options were refused. errors.Is(err, ErrInvalidFaultOptions)
// is true.
type RestartOptionsError FaultOptionsError

// Error implements error.
func (e *RestartOptionsError) Error() string { return (*FaultOptionsError)(e).message("") }

// Is makes errors.Is(err, ErrInvalidFaultOptions) true.
func (e *RestartOptionsError) Is(target error) bool { return target == ErrInvalidFaultOptions }

// APIServerRestart is what one [APIServerRestarter.Restart] observed.
type APIServerRestart struct {
	// DownErr is the error of the first request through the rest.Config
	// that the stopped server did not answer: the proof it was down.
	DownErr error
	// Downtime runs from that request to the first one the started server
	// answered ready: the outage a client saw, at the resolution of the
	// polls (tens of milliseconds).
	Downtime time.Duration
	// Killed is true when kube-apiserver outlasted StopTimeout and envtest
	// killed it.
	Killed bool
}

// APIServerRestartCounts is what an [APIServerRestarter] did.
type APIServerRestartCounts struct {
	// Restarts counts the restarts that completed: stopped, seen down,
	// started, seen serving.
	Restarts int
	// Kills counts the stops that ended in a kill.
	Kills int
}

// APIServerRestarter stops the kube-apiserver of an envtest environment
// and starts it again on the same etcd, with the same address and
// certificates: every object survives, every watch breaks, and clients built
// from the environment's rest.Config work again once it serves. It is safe
// for concurrent use; restarts run one at a time. Do not call env.Stop during
// a restart.
type APIServerRestarter struct {
	env  *envtest.Environment
	opts APIServerRestartOptions

	mu     sync.Mutex
	ready  string       // the /readyz URL, once env started
	hc     *http.Client // of the probes, once env started
	counts APIServerRestartCounts
}

// NewAPIServerRestarter makes env's API server restartable and returns its
// restarter. Call it before env.Start: envtest fixes the server's
// certificates and stop timeout when it starts it. It is a
// [*NotRestartableError] if env is nil, uses an existing cluster, has
// started, or has no CertDir to keep.
func NewAPIServerRestarter(env *envtest.Environment, opts APIServerRestartOptions) (*APIServerRestarter, error) {
	switch {
	case env == nil:
		return nil, &NotRestartableError{Reason: "no envtest.Environment"}
	case env.UseExistingCluster != nil && *env.UseExistingCluster:
		return nil, &NotRestartableError{Reason: "env uses an existing cluster, whose API server envtest does not run"}
	case env.Config != nil:
		return nil, &NotRestartableError{Reason: "env has started: call NewAPIServerRestarter before env.Start, which fixes the server's certificates and stop timeout"}
	}
	dir := opts.CertDir
	if dir == "" && env.ControlPlane.APIServer != nil {
		dir = env.ControlPlane.APIServer.CertDir
	}
	if dir == "" || envtestTempDir(dir) {
		return nil, &NotRestartableError{Reason: fmt.Sprintf(
			"no CertDir of the caller's (%q): a restart would make a new CA; set APIServerRestartOptions.CertDir", dir)}
	}
	for _, d := range []struct {
		field string
		value *time.Duration
		def   time.Duration
	}{{"APIServerRestartOptions.StopTimeout", &opts.StopTimeout, time.Second}, {"APIServerRestartOptions.Timeout", &opts.Timeout, 60 * time.Second}} {
		if *d.value < 0 {
			return nil, &RestartOptionsError{Field: d.field, Value: *d.value, Reason: "must not be negative"}
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	opts.CertDir = dir
	server := env.ControlPlane.GetAPIServer()
	server.CertDir = dir
	// envtest copies this into the server's StopTimeout at env.Start, and
	// the process takes it from there; every later start copies the
	// server's own.
	env.ControlPlaneStopTimeout = opts.StopTimeout
	server.StopTimeout = opts.StopTimeout
	return &APIServerRestarter{env: env, opts: opts}, nil
}

// probeClient returns the /readyz URL and a client for it, through env's
// rest.Config.
func (r *APIServerRestarter) probeClient() (string, *http.Client, error) {
	if r.hc != nil {
		return r.ready, r.hc, nil
	}
	if r.env.Config == nil {
		return "", nil, &NotRestartableError{Reason: "env has not started: call env.Start first"}
	}
	base, _, err := rest.DefaultServerUrlFor(r.env.Config)
	if err != nil {
		return "", nil, fmt.Errorf("racetest: API server URL of the rest.Config: %w", err)
	}
	probe := rest.CopyConfig(r.env.Config)
	// One probe must not wait for a server that is going away.
	probe.Timeout = time.Second
	hc, err := rest.HTTPClientFor(probe)
	if err != nil {
		return "", nil, fmt.Errorf("racetest: HTTP client for the API server: %w", err)
	}
	r.ready, r.hc = base.JoinPath("readyz").String(), hc
	return r.ready, r.hc, nil
}

// envtestTempDir reports whether dir is one envtest made for a process
// (os.MkdirTemp("", "k8s_test_framework_")): it deletes it on stop.
func envtestTempDir(dir string) bool {
	return filepath.Dir(filepath.Clean(dir)) == filepath.Clean(os.TempDir()) &&
		strings.HasPrefix(filepath.Base(dir), "k8s_test_framework_")
}

// Counts returns the counts so far.
func (r *APIServerRestarter) Counts() APIServerRestartCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// Restart stops the API server, polls until a request through env's
// rest.Config gets no answer, starts it again and polls until it is ready. envtest's
// Stop and Start block for up to StopTimeout and the environment's start
// timeout whatever ctx says; ctx bounds the polls.
//
// After an error the server may be down: a later Restart starts it again,
// env.Stop stops it.
func (r *APIServerRestarter) Restart(ctx context.Context) (APIServerRestart, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ready, hc, err := r.probeClient()
	if err != nil {
		return APIServerRestart{}, err
	}
	server := r.env.ControlPlane.GetAPIServer()
	// The probes' connections are to a server that goes away or to one the
	// caller did not ask for: none outlives the restart.
	defer utilnet.CloseIdleConnectionsFor(hc.Transport)

	var out APIServerRestart
	if err := server.Stop(); err != nil {
		if !killedOnStop(err) {
			return out, fmt.Errorf("racetest: stop the API server: %w", err)
		}
		out.Killed = true
		r.counts.Kills++
	}
	// A server shutting down may still answer, not ready; one that does
	// not answer at all has closed its listener, or is past answering.
	var downAt time.Time
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, r.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		err := probe(ctx, hc, ready)
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil && !errors.As(err, new(*statusError)) {
			out.DownErr, downAt = err, time.Now()
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return out, fmt.Errorf("racetest: the stopped API server still answers after %s: %w", r.opts.Timeout, err)
	}
	if err := server.Start(); err != nil {
		return out, fmt.Errorf("racetest: start the API server again: %w", err)
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, r.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		last = probe(ctx, hc, ready)
		if errors.As(last, new(*tls.CertificateVerificationError)) {
			return false, &NotRestartableError{Reason: "the restarted API server's certificate is not the one the rest.Config trusts", Err: last}
		}
		return last == nil, nil
	})
	if err != nil {
		if errors.Is(err, ErrNotRestartable) {
			return out, err
		}
		return out, fmt.Errorf("racetest: the restarted API server not ready after %s (last: %v): %w", r.opts.Timeout, last, err)
	}
	out.Downtime = time.Since(downAt)
	r.counts.Restarts++
	return out, nil
}

// statusError is an answer other than 200 from /readyz: the server runs.
type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("/readyz answered %d", e.code) }

// probe asks the server whether it is ready, through the caller's TLS: a
// server with other certificates fails verification.
func probe(ctx context.Context, hc *http.Client, ready string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &statusError{code: resp.StatusCode}
	}
	return nil
}

// killedOnStop reports whether err is envtest's report that a process
// outlasted its stop timeout and was killed: it is stopped all the same.
// An aggregate of such reports, env.Stop's when both kube-apiserver and
// etcd were killed, is one too.
func killedOnStop(err error) bool {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) && len(agg.Errors()) > 0 {
		return !slices.ContainsFunc(agg.Errors(), func(err error) bool { return !killedOnStop(err) })
	}
	return err != nil && strings.Contains(err.Error(), "timeout waiting for process")
}

// Stop stops the environment, as env.Stop does, except that a process
// envtest killed once it outlasted its stop timeout is stopped all the same,
// not an error: with the short StopTimeout a restarter sets, a stop is
// usually a kill. Call it instead of env.Stop, and not during a Restart.
func (r *APIServerRestarter) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.env.Stop(); err != nil && !killedOnStop(err) {
		return fmt.Errorf("racetest: stop the environment: %w", err)
	}
	return nil
}
