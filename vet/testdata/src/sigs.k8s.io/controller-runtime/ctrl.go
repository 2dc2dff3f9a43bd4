// Package controllerruntime is a stub of controller-runtime's root package.
package controllerruntime

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type Result = reconcile.Result
type Request = reconcile.Request

type Manager interface {
	GetClient() client.Client
	GetAPIReader() client.Reader
}
