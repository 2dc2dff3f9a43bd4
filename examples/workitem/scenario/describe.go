package scenario

import (
	"context"
	"fmt"
	"io"
	"runtime/pprof"
	"sort"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
	"github.com/racesafe/racesafe/racetest"
)

// describeStuck writes what the API server and each replica know of the
// items of names that are not in phase want: so that a run that fails says
// where it stopped (a cache behind, a refused read, a leader that does not
// act) rather than only that it did.
func describeStuck(ctx context.Context, w io.Writer, m *managers, replicas *racetest.Replicas, lease string, names []string, want v1.Phase, goroutines io.Writer) {
	c, ns := m.cluster.direct, m.cluster.ns
	var list v1.WorkItemList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		fmt.Fprintf(w, "describe: list WorkItems: %v\n", err)
		return
	}
	byName := map[string]*v1.WorkItem{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var stuck []string
	for _, n := range names {
		if it, ok := byName[n]; !ok || it.Status.Phase != want {
			stuck = append(stuck, n)
		}
	}
	fmt.Fprintf(w, "describe: %d of %d items not %s; %d WorkItems in %s at resourceVersion %s\n", len(stuck), len(names), want, len(list.Items), ns, list.ResourceVersion)
	var l coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: lease}, &l); err != nil {
		fmt.Fprintf(w, "  lease %s: %v\n", lease, err)
	} else {
		holder, renewed := "", ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.String()
		}
		fmt.Fprintf(w, "  lease %s: holder %q, renewed %s\n", lease, holder, renewed)
	}
	rs := replicas.Names()
	for _, r := range rs {
		st, _ := replicas.State(r)
		fmt.Fprintf(w, "  replica %s: elected %v, exited %v, queue depth %.0f, active workers %.0f, longest reconcile %.1fs, reconciles %d\n",
			r, !st.Elected.IsZero(), st.Exited,
			metricSum("workqueue_depth", "name", r), metricSum("controller_runtime_active_workers", "controller", r),
			metricSum("workqueue_longest_running_processor_seconds", "name", r), reconcileTotal(r))
	}
	sort.Strings(stuck)
	for i, n := range stuck {
		if i == 5 {
			fmt.Fprintf(w, "  ... and %d more\n", len(stuck)-i)
			break
		}
		it, ok := byName[n]
		if !ok {
			fmt.Fprintf(w, "  %s: not on the server\n", n)
			continue
		}
		fmt.Fprintf(w, "  %s: server %s\n", n, describeItem(it))
		for _, r := range rs {
			rec := m.reconciler(r)
			if rec == nil {
				continue
			}
			s := rec.State(ctx, types.NamespacedName{Namespace: ns, Name: n})
			cached := "none"
			if s.Cached != nil {
				cached = describeItem(s.Cached)
			}
			fmt.Fprintf(w, "    %s: acting %v, client pending %d, cache %s, refused: %v\n",
				r, s.Acting, s.Pending, cached, s.Refused)
		}
	}
	if goroutines != nil {
		_ = pprof.Lookup("goroutine").WriteTo(goroutines, 2)
	}
}

func describeItem(it *v1.WorkItem) string {
	var conds []string
	for _, c := range it.Status.Conditions {
		conds = append(conds, c.Type+"="+string(c.Status))
	}
	del := ""
	if !it.DeletionTimestamp.IsZero() {
		del = ", deleting"
	}
	return fmt.Sprintf("phase %q rv %s gen %d finalizers %v conditions [%s]%s",
		it.Status.Phase, it.ResourceVersion, it.Generation, it.Finalizers, strings.Join(conds, " "), del)
}
