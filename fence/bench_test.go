package fence_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/racesafe/racesafe/fence"
)

// BenchmarkWriteLatency measures a status patch on envtest three ways: the
// admin's own client (unfenced), the fenced client on a control plane
// without the policy (stamped: the impersonation alone), and the fenced
// client with the policy bound (fenced). It reports p50 and p99 per write;
// the policy's cost is fenced beside stamped. Each case starts its own
// control plane, once: run it with -benchtime=Nx.
func BenchmarkWriteLatency(b *testing.B) {
	for _, tc := range []struct {
		name   string
		policy bool
		fenced bool
	}{{"unfenced", false, false}, {"stamped", false, true}, {"fenced", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			fx := startFenced(b, tc.policy)
			ctx := b.Context()
			fx.fence.Set(fence.Epoch{Lease: fx.lease, Holder: "a", Transitions: 1})
			u := item(fx.ns, "bench")
			if err := fx.admin.Create(ctx, u); err != nil {
				b.Fatal(err)
			}
			c := client.Client(fx.client)
			if !tc.fenced {
				c = fx.admin
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"n":%d}}`, i))
				start := time.Now()
				if err := c.Status().Patch(ctx, u, patch); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
