package racetest_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// TestAPIServerRestart restarts the API server under a running cache and a
// plain watch, on a control plane of its own: the shared one of TestEnvtest
// must not go away under the other tests. The watch breaks, a request fails
// while the server is down, and after it the cache catches up through the
// same rest.Config, whose certificates the restarted server still has.
func TestAPIServerRestart(t *testing.T) {
	env, restarter := testenv.StartRestartable(t, testenv.Options{})
	cfg := env.Config

	direct := directClient(t, cfg)
	ns := createNamespace(t, direct)
	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: ns}}
	if err := direct.Create(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	counted, counter := racetest.CountRequests(cfg)
	c, err := cache.New(counted, cache.Options{HTTPClient: httpClient(t, counted), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunCache(t.Context(), t, c)
	waitForRV(t, c, before, before.ResourceVersion)
	watcher, err := client.NewWithWatch(cfg, client.Options{HTTPClient: httpClient(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(t.Context(), &corev1.ConfigMapList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: before.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	watches := counter.Count("watch", "configmaps")

	start := time.Now()
	restart, err := restarter.Restart(t.Context())
	if err != nil {
		t.Fatalf("Restart: %v", err)
	}
	t.Logf("restarted in %v: down %v (%v), killed %v", time.Since(start), restart.Downtime, restart.DownErr, restart.Killed)

	// The fault happened: a request failed, the watch broke.
	if restart.DownErr == nil {
		t.Fatal("no request failed while the API server was stopped")
	}
	poll(t, "the watch breaks", func() bool { return drained(w.ResultChan()) })
	if counts := restarter.Counts(); counts.Restarts != 1 || (counts.Kills == 1) != restart.Killed {
		t.Errorf("Counts() = %+v after one restart (killed %v)", counts, restart.Killed)
	}

	// It recovered: the client built before the restart writes, the cache
	// watches again and serves the write.
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns}}
	if err := direct.Create(t.Context(), after); err != nil {
		t.Fatalf("create through the rest.Config of before the restart: %v", err)
	}
	waitForRV(t, c, after, after.ResourceVersion)
	if n := counter.Count("watch", "configmaps"); n <= watches {
		t.Errorf("%d ConfigMap watches after the restart, %d before: the informer never watched again", n, watches)
	}
	t.Logf("the informer sent %d watches and %d lists of ConfigMaps across the restart",
		counter.Count("watch", "configmaps")-watches, counter.Count("list", "configmaps"))
}

// drained empties ch without blocking and reports whether it is closed.
func drained(ch <-chan watch.Event) bool {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		default:
			return false
		}
	}
}

// A restarter refuses an environment whose API server it cannot restart as
// the same server, with an error that says so.
func TestNewAPIServerRestarterRefusesWhatItCannotRestart(t *testing.T) {
	withServer := func(s *envtest.APIServer) *envtest.Environment {
		env := &envtest.Environment{}
		env.ControlPlane.APIServer = s
		return env
	}
	existing := true
	for name, env := range map[string]*envtest.Environment{
		"no environment":               nil,
		"existing cluster":             {UseExistingCluster: &existing},
		"started":                      {Config: &rest.Config{Host: "https://127.0.0.1:6443"}},
		"no CertDir":                   {},
		"no CertDir on its API server": withServer(&envtest.APIServer{}),
		// What envtest's own CertDir looks like once the server started:
		// it deletes the folder on stop and makes a new CA on start.
		"envtest's CertDir": withServer(&envtest.APIServer{CertDir: filepath.Join(os.TempDir(), "k8s_test_framework_12345")}),
	} {
		_, err := racetest.NewAPIServerRestarter(env, racetest.APIServerRestartOptions{})
		var notRestartable *racetest.NotRestartableError
		if !errors.Is(err, racetest.ErrNotRestartable) || !errors.As(err, &notRestartable) {
			t.Errorf("%s: NewAPIServerRestarter = %v, want a *NotRestartableError", name, err)
		}
	}

	_, err := racetest.NewAPIServerRestarter(&envtest.Environment{}, racetest.APIServerRestartOptions{CertDir: t.TempDir(), StopTimeout: -time.Second})
	var optsErr *racetest.RestartOptionsError
	if !errors.Is(err, racetest.ErrInvalidFaultOptions) || !errors.As(err, &optsErr) || optsErr.Field != "APIServerRestartOptions.StopTimeout" {
		t.Errorf("negative StopTimeout: %v, want a *RestartOptionsError for it", err)
	}

	env, dir := &envtest.Environment{}, t.TempDir()
	restarter, err := racetest.NewAPIServerRestarter(env, racetest.APIServerRestartOptions{CertDir: dir})
	if err != nil {
		t.Fatalf("an environment not started: %v", err)
	}
	if s := env.ControlPlane.APIServer; s == nil || s.CertDir != dir || env.ControlPlaneStopTimeout != time.Second {
		t.Errorf("env after NewAPIServerRestarter: API server %+v, stop timeout %v; want CertDir %s and 1s", s, env.ControlPlaneStopTimeout, dir)
	}
	if _, err := restarter.Restart(t.Context()); !errors.Is(err, racetest.ErrNotRestartable) {
		t.Errorf("Restart before env.Start: %v, want ErrNotRestartable", err)
	}
}
