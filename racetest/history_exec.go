package racetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pdbGVK is the kind the checker's histories write: a namespaced built-in
// kind with a status subresource that nothing in envtest reconciles.
var pdbGVK = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")

// executor runs the operations of one history and records them.
type executor struct {
	o          CheckOptions
	namespaces []string
	subject    client.Client
	direct     client.Client
	ambiguous  *atomic.Bool
	// last is the subject's newest copy of each object, by namespace/name:
	// what its writes start from, as a controller's do.
	last map[string]*policyv1.PodDisruptionBudget
}

func (e *executor) key(op Op) string { return e.namespaces[op.Namespace] + "/" + op.Name }

// run runs op and returns its record.
func (e *executor) run(ctx context.Context, op Op) Record {
	rec := Record{Op: op}
	if op.Kind == OpKindPause {
		rec.Start = time.Now()
		t := time.NewTimer(op.Pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		rec.End = time.Now()
		return rec
	}
	ctx, cancel := context.WithTimeout(ctx, e.o.OpTimeout)
	defer cancel()
	rec.Deadline, _ = ctx.Deadline()
	c := e.direct
	if op.Writer == WriterSubject {
		c = e.subject
	}
	if op.Writer == WriterSubject && op.Ambiguous {
		e.ambiguous.Store(true)
		defer e.ambiguous.Store(false)
	}
	rec.Start = time.Now()
	err := e.do(ctx, c, op, &rec)
	rec.End = time.Now()
	rec.Err = err
	rec.NotFound = apierrors.IsNotFound(err)
	rec.Refused = err != nil && op.isRead() && e.o.Subject.Refused != nil && e.o.Subject.Refused(err)
	return rec
}

// base is the object a write starts from: the subject's newest copy, or,
// for the other writer, the server's current one; a new object when there
// is none.
func (e *executor) base(ctx context.Context, op Op) *policyv1.PodDisruptionBudget {
	if op.Writer == WriterSubject {
		if p, ok := e.last[e.key(op)]; ok {
			return p.DeepCopy()
		}
	} else {
		p := &policyv1.PodDisruptionBudget{}
		if err := e.direct.Get(ctx, types.NamespacedName{Namespace: e.namespaces[op.Namespace], Name: op.Name}, p); err == nil {
			return p
		}
	}
	p := &policyv1.PodDisruptionBudget{}
	p.Namespace, p.Name = e.namespaces[op.Namespace], op.Name
	return p
}

// remember keeps p as the subject's newest copy of its object.
func (e *executor) remember(op Op, obj client.Object) {
	if op.Writer != WriterSubject {
		return
	}
	p, err := asPDB(obj)
	if err == nil && p.Name != "" {
		e.last[p.Namespace+"/"+p.Name] = p
	}
}

func (e *executor) do(ctx context.Context, c client.Client, op Op, rec *Record) error {
	ns := e.namespaces[op.Namespace]
	switch op.Kind {
	case OpKindGet:
		obj := newForm(op.Form)
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: op.Name}, obj); err != nil {
			return err
		}
		rec.Got, rec.Found = versionOf(obj), true
		if op.Form != FormMetadata {
			e.remember(op, obj)
		}
		return nil
	case OpKindList:
		return e.list(ctx, c, op, ns, rec)
	case OpKindDeleteAllOf:
		sel, err := labels.Parse(op.Selector)
		if err != nil {
			return fmt.Errorf("selector %q: %w", op.Selector, err)
		}
		return c.DeleteAllOf(ctx, &policyv1.PodDisruptionBudget{}, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
	}
	p := e.base(ctx, op)
	obj, err := e.write(ctx, c, op, p, rec)
	if err != nil {
		return err
	}
	if op.Kind != OpKindDelete {
		rec.Got, rec.Found = versionOf(obj), true
		e.remember(op, obj)
	}
	return nil
}

// write sends the write of op, built on p, and returns the object the
// answer was decoded into.
func (e *executor) write(ctx context.Context, c client.Client, op Op, p *policyv1.PodDisruptionBudget, rec *Record) (client.Object, error) {
	rec.Sent = versionOf(p)
	before := p.DeepCopy()
	switch op.Kind {
	case OpKindCreate, OpKindGenerateName:
		p = &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
		if op.Kind == OpKindGenerateName {
			p.Name, p.GenerateName = "", op.Name+"-"
		}
		setTier(p, op.Tier)
		if op.Finalizer {
			p.Finalizers = []string{checkerFinalizer}
		}
		p.Spec.MinAvailable = ptrIntOrString(op.Index % 5)
		obj, err := inForm(p, op.Form)
		if err != nil {
			return nil, err
		}
		return obj, c.Create(ctx, obj)
	case OpKindUpdate:
		setTier(p, op.Tier)
		p.Finalizers = nil
		if op.Finalizer {
			p.Finalizers = []string{checkerFinalizer}
		}
		p.Spec.MinAvailable = ptrIntOrString(op.Index % 5)
		obj, err := inForm(p, op.Form)
		if err != nil {
			return nil, err
		}
		return obj, c.Update(ctx, obj)
	case OpKindMergePatch:
		setTier(p, op.Tier)
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations["racesafe.io/op"] = strconv.Itoa(op.Index)
		obj, from, err := inForms(p, before, op.Form)
		if err != nil {
			return nil, err
		}
		patch := client.MergeFrom(from)
		if op.Precondition == "rv" {
			patch = client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{})
		}
		return obj, c.Patch(ctx, obj, patch)
	case OpKindApply:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(pdbGVK)
		u.SetNamespace(p.Namespace)
		u.SetName(p.Name)
		u.SetLabels(map[string]string{tierLabel: op.Tier})
		if op.Tier == "" {
			u.SetLabels(map[string]string{"racesafe.io/applied": "true"})
		}
		return u, c.Patch(ctx, u, client.Apply, client.FieldOwner("racesafe-checker"), client.ForceOwnership) //nolint:staticcheck // the Patch form works on every supported controller-runtime
	case OpKindStatusUpdate:
		p.Status.ObservedGeneration = p.Generation
		p.Status.DesiredHealthy = int32(op.Index)
		obj, err := inForm(p, op.Form)
		if err != nil {
			return nil, err
		}
		return obj, c.Status().Update(ctx, obj)
	case OpKindStatusPatch:
		p.Status.CurrentHealthy = int32(op.Index)
		return p, c.Status().Patch(ctx, p, client.MergeFrom(before))
	case OpKindUnfinalize:
		p.Finalizers = nil
		obj, from, err := inForms(p, before, op.Form)
		if err != nil {
			return nil, err
		}
		return obj, c.Patch(ctx, obj, client.MergeFrom(from))
	case OpKindDelete:
		var opts []client.DeleteOption
		switch op.Precondition {
		case "uid":
			opts = append(opts, client.Preconditions{UID: &p.UID})
		case "rv":
			opts = append(opts, client.Preconditions{ResourceVersion: &p.ResourceVersion})
		}
		if op.Propagation != "" {
			opts = append(opts, client.PropagationPolicy(metav1.DeletionPropagation(op.Propagation)))
		}
		obj, err := inForm(p, op.Form)
		if err != nil {
			return nil, err
		}
		return obj, c.Delete(ctx, obj, opts...)
	}
	return nil, fmt.Errorf("racetest: no write %q", op.Kind)
}

func (e *executor) list(ctx context.Context, c client.Client, op Op, ns string, rec *Record) error {
	var list client.ObjectList
	switch op.Form {
	case FormUnstructured:
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(pdbGVK.GroupVersion().WithKind("PodDisruptionBudgetList"))
		list = u
	case FormMetadata:
		m := &metav1.PartialObjectMetadataList{}
		m.SetGroupVersionKind(pdbGVK.GroupVersion().WithKind("PodDisruptionBudgetList"))
		list = m
	default:
		list = &policyv1.PodDisruptionBudgetList{}
	}
	opts := []client.ListOption{client.InNamespace(ns)}
	if op.Selector != "" {
		sel, err := labels.Parse(op.Selector)
		if err != nil {
			return fmt.Errorf("selector %q: %w", op.Selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return err
	}
	rec.Items = []Version{}
	return forEachItem(list, func(obj client.Object) {
		if !strings.HasPrefix(obj.GetName(), sentinelName) {
			rec.Items = append(rec.Items, versionOf(obj))
		}
	})
}

func forEachItem(list client.ObjectList, f func(client.Object)) error {
	switch l := list.(type) {
	case *policyv1.PodDisruptionBudgetList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	case *unstructured.UnstructuredList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	case *metav1.PartialObjectMetadataList:
		for i := range l.Items {
			f(&l.Items[i])
		}
	default:
		return fmt.Errorf("racetest: list of %T", list)
	}
	return nil
}

// newForm returns an empty PodDisruptionBudget in form f.
func newForm(f Form) client.Object {
	switch f {
	case FormUnstructured:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(pdbGVK)
		return u
	case FormMetadata:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(pdbGVK)
		return m
	}
	return &policyv1.PodDisruptionBudget{}
}

// inForm returns p in form f: itself, unstructured, or its metadata.
func inForm(p *policyv1.PodDisruptionBudget, f Form) (client.Object, error) {
	switch f {
	case FormUnstructured:
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		if err != nil {
			return nil, fmt.Errorf("racetest: unstructured PodDisruptionBudget: %w", err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(pdbGVK)
		return u, nil
	case FormMetadata:
		m := &metav1.PartialObjectMetadata{ObjectMeta: *p.ObjectMeta.DeepCopy()}
		m.SetGroupVersionKind(pdbGVK)
		return m, nil
	}
	return p, nil
}

// inForms returns p and before in form f, for a patch from one to the
// other.
func inForms(p, before *policyv1.PodDisruptionBudget, f Form) (obj, from client.Object, err error) {
	if obj, err = inForm(p, f); err != nil {
		return nil, nil, err
	}
	if from, err = inForm(before, f); err != nil {
		return nil, nil, err
	}
	return obj, from, nil
}

// asPDB returns obj as a typed PodDisruptionBudget.
func asPDB(obj client.Object) (*policyv1.PodDisruptionBudget, error) {
	switch o := obj.(type) {
	case *policyv1.PodDisruptionBudget:
		return o.DeepCopy(), nil
	case *unstructured.Unstructured:
		p := &policyv1.PodDisruptionBudget{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, p); err != nil {
			return nil, fmt.Errorf("racetest: typed PodDisruptionBudget: %w", err)
		}
		return p, nil
	}
	return nil, errors.New("racetest: no PodDisruptionBudget in a metadata-only object")
}

func setTier(p *policyv1.PodDisruptionBudget, tier string) {
	if tier == "" {
		delete(p.Labels, tierLabel)
		return
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[tierLabel] = tier
}

func ptrIntOrString(n int) *intstr.IntOrString {
	v := intstr.FromInt32(int32(n))
	return &v
}
