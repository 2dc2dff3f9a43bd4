// Package reconcile is a stub of controller-runtime's.
package reconcile

import "time"

type Result struct {
	Requeue      bool
	RequeueAfter time.Duration
}

type Request struct{ Namespace, Name string }
