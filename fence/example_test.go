package fence_test

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/fence"
)

// A controller's process builds its client on the fenced config, and sets
// the epoch when it acquires the lease.
func Example() {
	run := func(ctx context.Context, cfg *rest.Config, lease *coordinationv1.Lease) error {
		id, err := fence.WhoAmI(ctx, cfg)
		if err != nil {
			return err
		}
		c, err := client.NewWithWatch(fence.Config(cfg, id), client.Options{})
		if err != nil {
			return err
		}
		f := &fence.Fence{}
		fenced := fence.NewClient(c, f)
		// On acquiring the lease:
		f.Set(fence.EpochOf(lease))
		// Every write through fenced now carries the epoch.
		_ = fenced
		return nil
	}
	_ = run
}

func ExampleEpochOf() {
	lease := &coordinationv1.Lease{}
	lease.Namespace, lease.Name = "workitem-system", "workitem.demo.racesafe.io"
	lease.Spec.HolderIdentity = ptr.To("replica-0_3f2a")
	lease.Spec.LeaseTransitions = ptr.To(int32(7))
	fmt.Println(fence.EpochOf(lease))
	// Output: replica-0_3f2a#7
}

func ExampleIdempotencyKey() {
	e := fence.Epoch{Lease: types.NamespacedName{Namespace: "ns", Name: "lease"}, Holder: "replica-0_3f2a", Transitions: 7}
	fmt.Println(fence.IdempotencyKey("6c1b2e0e-uid", e, "uninstall"))
	// Output: 6c1b2e0e-uid/uninstall/7/replica-0_3f2a
}

func ExamplePolicy() {
	p, err := fence.Policy(fence.PolicyOptions{
		Name:      "fence.workitem.demo.racesafe.io",
		Resources: []schema.GroupResource{{Group: "demo.racesafe.io", Resource: "workitems"}},
	})
	if err != nil {
		panic(err)
	}
	b := fence.Binding(p.Name, types.NamespacedName{Namespace: "workitem-system", Name: "workitem.demo.racesafe.io"})
	fmt.Println(p.Spec.ParamKind.Kind, b.Spec.ParamRef.Namespace+"/"+b.Spec.ParamRef.Name)
	// Output: Lease workitem-system/workitem.demo.racesafe.io
}
