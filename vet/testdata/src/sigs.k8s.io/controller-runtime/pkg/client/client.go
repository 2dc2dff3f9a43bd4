// Package client is a stub of controller-runtime's, with the signatures
// the racesafe checkers look at.
package client

import "context"

type Object interface {
	GetName() string
	GetNamespace() string
}

type ObjectList interface{ IsList() }

type ObjectKey struct{ Namespace, Name string }

func ObjectKeyFromObject(o Object) ObjectKey { return ObjectKey{o.GetNamespace(), o.GetName()} }

type GetOption interface{}
type ListOption interface{}
type CreateOption interface{}
type UpdateOption interface{}
type PatchOption interface{}
type DeleteOption interface{}

type Patch interface{ Data(Object) ([]byte, error) }

type Reader interface {
	Get(ctx context.Context, key ObjectKey, obj Object, opts ...GetOption) error
	List(ctx context.Context, list ObjectList, opts ...ListOption) error
}

type Writer interface {
	Create(ctx context.Context, obj Object, opts ...CreateOption) error
	Update(ctx context.Context, obj Object, opts ...UpdateOption) error
	Patch(ctx context.Context, obj Object, patch Patch, opts ...PatchOption) error
	Delete(ctx context.Context, obj Object, opts ...DeleteOption) error
}

type SubResourceWriter interface {
	Update(ctx context.Context, obj Object, opts ...UpdateOption) error
	Patch(ctx context.Context, obj Object, patch Patch, opts ...PatchOption) error
}

type StatusClient interface{ Status() SubResourceWriter }

type Client interface {
	Reader
	Writer
	StatusClient
}

type Options struct{}

func New(cfg any, o Options) (Client, error) { return nil, nil }

func MergeFrom(obj Object) Patch { return nil }

type MergeFromOption interface{}

type MergeFromWithOptimisticLock struct{}

func MergeFromWithOptions(obj Object, opts ...MergeFromOption) Patch { return nil }

func InNamespace(ns string) ListOption { return nil }
