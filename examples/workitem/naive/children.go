package naive

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
)

// An install is one child object on the API server: a ConfigMap labelled
// with the item's UID (v1.ChildLabel), controlled by the item, named by
// generateName "<item>-". Controllers decide from a List of children as
// operators commonly do: from the cache, by label.

// ListChildren lists item's children through r, by label. With a
// manager's client, r is the cache.
func ListChildren(ctx context.Context, r client.Reader, item *v1.WorkItem) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, client.InNamespace(item.Namespace),
		client.MatchingLabels{v1.ChildLabel: string(item.UID)}); err != nil {
		return nil, fmt.Errorf("list children of %s: %w", item.Name, err)
	}
	return list.Items, nil
}

// EnsureChild creates item's child unless the List shows one. It returns
// the child as the server answered the Create, or nil when none was created.
// The List is the decision: a cache that has not yet seen the last Create
// shows no child, and a second one is created.
func EnsureChild(ctx context.Context, c client.Client, scheme *runtime.Scheme, item *v1.WorkItem) (*corev1.ConfigMap, error) {
	children, err := ListChildren(ctx, c, item)
	if err != nil || len(children) > 0 {
		return nil, err
	}
	child := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: item.Name + "-",
			Namespace:    item.Namespace,
			Labels:       map[string]string{v1.ChildLabel: string(item.UID)},
		},
		Data: map[string]string{"payload": item.Spec.Payload},
	}
	if err := controllerutil.SetControllerReference(item, child, scheme); err != nil {
		return nil, fmt.Errorf("child of %s: %w", item.Name, err)
	}
	if err := c.Create(ctx, child); err != nil {
		return nil, fmt.Errorf("create child of %s: %w", item.Name, err)
	}
	return child, nil
}

// DeleteChildren deletes every child the List shows, ignoring children
// already gone. It returns those it deleted.
func DeleteChildren(ctx context.Context, c client.Client, item *v1.WorkItem) ([]corev1.ConfigMap, error) {
	children, err := ListChildren(ctx, c, item)
	if err != nil {
		return nil, err
	}
	deleted := children[:0]
	for i := range children {
		ch := &children[i]
		if err := c.Delete(ctx, ch, client.Preconditions{UID: &ch.UID}); client.IgnoreNotFound(err) != nil {
			return deleted, fmt.Errorf("delete child %s of %s: %w", ch.Name, item.Name, err)
		}
		deleted = append(deleted, *ch)
	}
	return deleted, nil
}

// installChild is the naive controller's install step: the child, from
// the cached List.
func (r *Controller) installChild(ctx context.Context, item *v1.WorkItem) error {
	_, err := EnsureChild(ctx, r.Client, r.Scheme(), item)
	return err
}

// uninstallChildren is its uninstall step: delete what the cached List shows.
func (r *Controller) uninstallChildren(ctx context.Context, item *v1.WorkItem) error {
	_, err := DeleteChildren(ctx, r.Client, item)
	return err
}
