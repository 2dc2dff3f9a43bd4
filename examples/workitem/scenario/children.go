package scenario

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/racesafe/racesafe/examples/workitem/api/v1alpha1"
)

// childWatch counts, on the server, every child ever created in a
// namespace: a watch of ConfigMaps carrying v1.ChildLabel, opened before the
// first item exists and resumed from its last resourceVersion whenever the
// server ends it. A watch delivers every change in order, so a child created
// and deleted again is still seen created; the scenario's own client is not
// lagged.
type childWatch struct {
	c  client.WithWatch
	ns string

	mu      sync.Mutex
	created map[string]map[types.UID]struct{} // by the owner UID in the label
	err     error
	done    chan struct{}
	cancel  context.CancelFunc
}

// markerOwner is the label value of the markers sync creates: no item has it.
const markerOwner = "scenario-marker"

func watchChildren(ctx context.Context, c client.WithWatch, ns string) (*childWatch, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.HasLabels{v1.ChildLabel}); err != nil {
		return nil, fmt.Errorf("list children: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cw := &childWatch{c: c, ns: ns, created: map[string]map[types.UID]struct{}{}, done: make(chan struct{}), cancel: cancel}
	for i := range list.Items {
		cw.add(&list.Items[i])
	}
	w, err := cw.open(ctx, list.ResourceVersion)
	if err != nil {
		cancel()
		return nil, err
	}
	go cw.run(ctx, w, list.ResourceVersion)
	return cw, nil
}

func (cw *childWatch) open(ctx context.Context, rv string) (watch.Interface, error) {
	w, err := cw.c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(cw.ns), client.HasLabels{v1.ChildLabel},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		return nil, fmt.Errorf("watch children: %w", err)
	}
	return w, nil
}

func (cw *childWatch) run(ctx context.Context, w watch.Interface, rv string) {
	defer close(cw.done)
	defer func() {
		if w != nil { // nil when a reopen failed
			w.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				w.Stop()
				var err error
				if w, err = cw.open(ctx, rv); err != nil {
					if ctx.Err() == nil {
						cw.mu.Lock()
						cw.err = err
						cw.mu.Unlock()
					}
					return
				}
				continue
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			rv = cm.ResourceVersion
			if ev.Type == watch.Added {
				cw.add(cm)
			}
		}
	}
}

func (cw *childWatch) add(cm *corev1.ConfigMap) {
	owner := cm.Labels[v1.ChildLabel]
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.created[owner] == nil {
		cw.created[owner] = map[types.UID]struct{}{}
	}
	cw.created[owner][cm.UID] = struct{}{}
}

// sync returns once the watch has delivered every child created before it
// was called: it creates a marker child and waits to see it, which a watch
// delivers only after every earlier event.
func (cw *childWatch) sync(ctx context.Context) error {
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "marker-", Namespace: cw.ns, Labels: map[string]string{v1.ChildLabel: markerOwner},
	}}
	if err := cw.c.Create(ctx, marker); err != nil {
		return fmt.Errorf("create marker: %w", err)
	}
	defer func() { _ = cw.c.Delete(context.WithoutCancel(ctx), marker) }()
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		if cw.err != nil {
			return false, cw.err
		}
		_, seen := cw.created[markerOwner][marker.UID]
		return seen, nil
	})
}

func (cw *childWatch) stop() {
	cw.cancel()
	<-cw.done
}

// mergedDuplicates counts the children beyond one per item seen by any of
// the watches; a child several saw is one child.
func mergedDuplicates(watches ...*childWatch) int {
	byOwner := map[string]map[types.UID]struct{}{}
	for _, cw := range watches {
		cw.mu.Lock()
		for owner, children := range cw.created {
			if byOwner[owner] == nil {
				byOwner[owner] = map[types.UID]struct{}{}
			}
			maps.Copy(byOwner[owner], children)
		}
		cw.mu.Unlock()
	}
	n := 0
	for owner, children := range byOwner {
		if owner != markerOwner && len(children) > 1 {
			n += len(children) - 1
		}
	}
	return n
}
