// Package schemes lets a package that is handed a client give that client's
// scheme to a recorder it is handed too, without either package importing
// the other: statusupdate.New gives its client's scheme to an
// *expectations.Tracker in Options.Expectations, so that a Tracker made
// without Options.Scheme still knows the kinds the Patcher writes.
//
// The recipient registers, at package initialisation, a function that
// takes what it can from a value offered to it; Offer does nothing until
// one is registered.
package schemes

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/racesafe/racesafe/internal/objcopy"
)

// Holder is what has a scheme: a client.Client, and the readers that
// controller-runtime builds on one (a manager's GetAPIReader()).
type Holder interface {
	Scheme() *runtime.Scheme
}

// Of returns the scheme of v when v has one (a non-nil Holder whose scheme
// is not nil), and nil otherwise.
func Of(v any) *runtime.Scheme {
	h, ok := v.(Holder)
	if !ok || objcopy.IsNil(h) {
		return nil
	}
	return h.Scheme()
}

var taker atomic.Pointer[func(recipient any, s *runtime.Scheme)]

// Register sets the function Offer calls. The last one registered wins; only
// package expectations registers one.
func Register(take func(recipient any, s *runtime.Scheme)) {
	taker.Store(&take)
}

// Offer gives recipient the scheme of each of from that has one, in order,
// through the registered function, which decides whether recipient takes
// it. It does nothing for a nil recipient or when nothing is registered.
func Offer(recipient any, from ...any) {
	take := taker.Load()
	if take == nil || objcopy.IsNil(recipient) {
		return
	}
	for _, f := range from {
		if s := Of(f); s != nil {
			(*take)(recipient, s)
		}
	}
}
