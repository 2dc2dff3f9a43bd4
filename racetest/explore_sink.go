package racetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// exploreSink is the log sink of a run's managers: it passes every line to
// the logger it wraps and keeps the values a reconcile's logger carries,
// so that a read, a write or a panic can name its reconcile. A panic is
// seen as controller-runtime reports a recovered one: the reconcile's
// "Reconciler error" whose error reads "panic: ... [recovered]".
type exploreSink struct {
	inner  logr.LogSink
	run    *exploreRun
	mgr    *managerStarts
	values []any
}

// managerStarts counts a manager's controllers, as Setup adds them, and
// those that started their workers, as they log it: a run's workload
// starts once every controller has its sources synced, so that no event
// of the workload reaches a controller only as part of an initial list.
type managerStarts struct {
	controllers, started atomic.Int32
}

// setupManager is the manager Setup is handed: it counts the controllers
// added to it.
type setupManager struct {
	manager.Manager
	starts *managerStarts
}

func (m *setupManager) Add(r manager.Runnable) error {
	if _, ok := r.(interface{ GetLogger() logr.Logger }); ok {
		m.starts.controllers.Add(1)
	}
	return m.Manager.Add(r)
}

func (s *exploreSink) Init(logr.RuntimeInfo) {}

// Enabled is true at every level: the lines Explore reads must reach it
// whatever the wrapped logger keeps.
func (s *exploreSink) Enabled(int) bool { return true }

func (s *exploreSink) Info(level int, msg string, kv ...any) {
	if msg == "Starting workers" && s.mgr != nil {
		s.mgr.started.Add(1)
	}
	if s.inner.Enabled(level) {
		s.inner.Info(level, msg, kv...)
	}
}

func (s *exploreSink) Error(err error, msg string, kv ...any) {
	if err != nil && msg == "Reconciler error" {
		if e := err.Error(); strings.HasPrefix(e, "panic: ") && strings.HasSuffix(e, " [recovered]") && !strings.Contains(e, errCrashed.Error()) {
			s.run.panicked(append(slices.Clone(s.values), kv...), strings.TrimSuffix(strings.TrimPrefix(e, "panic: "), " [recovered]"))
		}
	}
	s.inner.Error(err, msg, kv...)
}

func (s *exploreSink) WithValues(kv ...any) logr.LogSink {
	return &exploreSink{inner: s.inner.WithValues(kv...), run: s.run, mgr: s.mgr, values: append(slices.Clone(s.values), kv...)}
}

func (s *exploreSink) WithName(name string) logr.LogSink {
	return &exploreSink{inner: s.inner.WithName(name), run: s.run, mgr: s.mgr, values: s.values}
}

// valueOf returns the last value of key in kv, "" when absent.
func valueOf(kv []any, key string) string {
	out := ""
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok && k == key {
			out = fmt.Sprint(kv[i+1])
		}
	}
	return out
}

// reconcileOf names the reconcile ctx belongs to, "" outside one: the
// reconciles of a request are numbered in the order they first read or
// wrote.
func (r *exploreRun) reconcileOf(ctx context.Context) string {
	l, err := logr.FromContext(ctx)
	if err != nil {
		return ""
	}
	s, ok := l.GetSink().(*exploreSink)
	if !ok || s.run != r {
		return ""
	}
	return r.describeReconcile(s.values)
}

func (r *exploreRun) describeReconcile(kv []any) string {
	id := valueOf(kv, "reconcileID")
	if id == "" {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.reconciles[id]; ok {
		return d
	}
	req := valueOf(kv, "name")
	if ns := valueOf(kv, "namespace"); ns != "" {
		req = ns + "/" + req
	}
	ctrl := valueOf(kv, "controller")
	r.reconcileN[ctrl+" "+req]++
	d := fmt.Sprintf("reconcile #%d of %s (controller %s)", r.reconcileN[ctrl+" "+req], req, ctrl)
	r.reconciles[id] = d
	return d
}

func (r *exploreRun) panicked(kv []any, value string) {
	d := orController(r.describeReconcile(kv))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.panics = append(r.panics, fmt.Sprintf("%s panicked: %s", d, value))
}
