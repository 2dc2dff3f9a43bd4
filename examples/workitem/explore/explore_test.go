// Package explore points racetest.Explore at the incident's controller, its
// drop-in port and its full port, without telling it where to look.
package explore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/examples/workitem/naive"
	"github.com/racesafe/racesafe/examples/workitem/ported"
	"github.com/racesafe/racesafe/examples/workitem/reconciler"
	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
	"github.com/racesafe/racesafe/requeue"
)

// workload creates one item, waits until it is Ready, deletes it.
func workload(ctx context.Context, c client.Client, ns string) error {
	item := &v1.WorkItem{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "item"}, Spec: v1.WorkItemSpec{Payload: "p"}}
	if err := c.Create(ctx, item); err != nil {
		return err
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var got v1.WorkItem
		if err := c.Get(ctx, client.ObjectKeyFromObject(item), &got); err != nil {
			return false, nil
		}
		return got.Status.Phase == v1.PhaseReady, nil
	}); err != nil {
		return fmt.Errorf("item never Ready: %w", err)
	}
	return c.Delete(ctx, item)
}

// settled: the item is gone, its finalizer released.
func settled(ctx context.Context, c client.Reader, ns string) (bool, error) {
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "item"}, &v1.WorkItem{})
	return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
}

func explore(t *testing.T, env *testenv.Env, setup func(mgr manager.Manager) error) *racetest.ExploreReport {
	t.Helper()
	report, err := racetest.Explore(t.Context(), env.Config, racetest.ExploreOptions{
		Scheme:   scenario.Scheme(),
		Setup:    setup,
		Workload: workload,
		Settled:  settled,
		Kinds:    []client.Object{&v1.WorkItem{}, &corev1.ConfigMap{}},
		Parallel: 3,
		TestName: t.Name(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", report)
	return report
}

// replaying: one plan runs alone (the report's replay command), so the
// assertions over all plans do not apply.
func replaying() bool { return os.Getenv("RACESAFE_EXPLORE_PLAN") != "" }

func installer() *sim.Installer {
	return sim.New(sim.Options{InstallDuration: 100 * time.Millisecond, UninstallDuration: 100 * time.Millisecond})
}

func TestExploreWorkItem(t *testing.T) {
	if os.Getenv("RACESAFE_EXPLORE_PLAN") == "" && testing.Short() {
		t.Skip("explores three controllers on envtest")
	}
	env := testenv.Start(t, testenv.Options{CRDDirectoryPaths: []string{"../config/crd"}})
	opts := controller.Options{}
	t.Run("naive", func(t *testing.T) {
		report := explore(t, env, func(mgr manager.Manager) error {
			return (&naive.Controller{Client: mgr.GetClient(), ConfigManager: &settings.Manager{}, Installer: installer(), Variant: naive.Incident}).
				SetupWithManager(mgr, "naive", opts)
		})
		var stuck, duplicate bool
		for _, p := range report.Failed() {
			all := strings.Join(p.Failures, "; ")
			stuck = stuck || strings.Contains(all, "liveness")
			duplicate = duplicate || strings.Contains(all, "duplicate")
		}
		if replaying() {
			return
		}
		if !stuck || !duplicate {
			t.Errorf("Explore on the incident's controller: a stuck deletion found %v, a duplicate child found %v; want both", stuck, duplicate)
		}
	})
	t.Run("racesafe", func(t *testing.T) {
		report := explore(t, env, func(mgr manager.Manager) error {
			r, err := reconciler.New(mgr, reconciler.Options{Installer: installer(), Interval: requeue.Fixed(time.Second)})
			if err != nil {
				return err
			}
			return r.SetupWithManager(mgr, "racesafe", opts)
		})
		for _, p := range report.Failed() {
			t.Errorf("plan %s failed on the full port: %s", p.Plan.Name, strings.Join(p.Failures, "; "))
		}
		// Every kind of plan happened: the stale version was served, the
		// List lacked the child, the write was answered with a 500, the
		// manager was replaced; and the full port survived each.
		if replaying() {
			return
		}
		happened := map[racetest.PlanKind]bool{}
		for _, p := range report.Plans {
			if p.Perturbation != "" {
				happened[p.Plan.Kind] = true
			}
		}
		for _, k := range []racetest.PlanKind{racetest.StaleReadAfterWrite, racetest.StaleListAfterCreate, racetest.AmbiguousWrite, racetest.CrashAfterWrite} {
			if !happened[k] {
				t.Errorf("no %s plan perturbed the full port's view", k)
			}
		}
	})
	t.Run("ported", func(t *testing.T) {
		report := explore(t, env, func(mgr manager.Manager) error {
			return ported.SetupWithManager(mgr, &naive.Controller{Client: mgr.GetClient(), ConfigManager: &settings.Manager{}, Installer: installer(), Variant: naive.Incident}, "ported", opts)
		})
		for _, p := range report.Failed() {
			t.Logf("the drop-in port fails %s: %s", p.Plan.Name, strings.Join(p.Failures, "; "))
		}
	})
}
