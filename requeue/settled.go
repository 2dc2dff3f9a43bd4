package requeue

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/racesafe/racesafe/expectations"
)

// Reasons [SettledWhen] reports without asking its func.
const (
	// ReasonStale: the object could not be read fresh (expectations.ErrStale).
	ReasonStale = "stale"
)

// SettledWhen builds a [UntilSettledOptions].Settled that reads the request's
// object from r (the manager's client, or an expectations.Client) into a
// new T and asks settled about it. An object that is gone is settled: there
// is nothing left to reconcile. A read refused as stale is unsettled, reason
// [ReasonStale], so the request comes back. Any other read error is returned.
//
// T must be a pointer to a struct type, such as *v1.WorkItem; any other T is
// an error from every call, never a silent "settled".
func SettledWhen[T client.Object](r client.Reader, settled func(obj T) (ok bool, reason string)) func(context.Context, reconcile.Request) (bool, string, error) {
	return func(ctx context.Context, req reconcile.Request) (bool, string, error) {
		obj, err := newObject[T]()
		if err != nil {
			return false, "", err
		}
		if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return true, "", nil
			case errors.Is(err, expectations.ErrStale):
				return false, ReasonStale, nil
			}
			return false, "", err
		}
		ok, reason := settled(obj)
		return ok, reason, nil
	}
}

func newObject[T client.Object]() (T, error) {
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return zero, fmt.Errorf("requeue: SettledWhen needs a pointer to a struct type, not %v", t)
	}
	obj, ok := reflect.New(t.Elem()).Interface().(T)
	if !ok {
		return zero, fmt.Errorf("requeue: cannot make a %v", t)
	}
	return obj, nil
}
