// Package ported is the incident's controller (examples/workitem/naive, its
// code untouched) made safe by the drop-in port of docs/adopting.md: a
// wrapped client and a requeue floor, wired in SetupWithManager.
package ported

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/racesafe/racesafe/examples/workitem/naive"
)

// SetupWithManager registers r, the incident's controller, behind the
// drop-in port.
//
// TODO(lead): the port itself lands with expectations.Client; until then
// this registers r as it is.
func SetupWithManager(mgr ctrl.Manager, r *naive.Controller, name string, opts controller.Options) error {
	return r.SetupWithManager(mgr, name, opts)
}
