package fence

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Identity is who the process authenticates as. A fenced request
// impersonates this same user, with the same groups, and adds the epoch as
// user extra: the API server's admission sees it in request.userInfo.extra
// on every verb and every subresource, status writes, patches, applies and
// deletes included, which no field of the object can do.
type Identity struct {
	Username string
	Groups   []string
}

// WhoAmI asks the API server who cfg authenticates as (a
// SelfSubjectReview, authentication.k8s.io/v1).
func WhoAmI(ctx context.Context, cfg *rest.Config) (Identity, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Identity{}, fmt.Errorf("fence: who am I: %w", err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("fence: who am I: %w", err)
	}
	return Identity{Username: r.Status.UserInfo.Username, Groups: r.Status.UserInfo.Groups}, nil
}

// Config returns a copy of cfg whose requests, when their context carries
// an epoch ([WithEpoch]), impersonate id with the epoch and its lease as
// user extra. Requests without an epoch (reads, watches) go out as cfg
// sends them. cfg must not impersonate already.
//
// The user needs RBAC to impersonate itself: the verb impersonate on its own
// user (or serviceaccount) name, on its groups, and on the resources
// userextras/fence.racesafe.io/lease and userextras/fence.racesafe.io/epoch.
// The user's own extra (such as a token's credential id) is not carried over.
func Config(cfg *rest.Config, id Identity) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &stamper{next: rt, id: id}
	})
	return cfg
}

type stamper struct {
	next http.RoundTripper
	id   Identity
}

func (s *stamper) RoundTrip(req *http.Request) (*http.Response, error) {
	e, ok := EpochFrom(req.Context())
	if !ok {
		return s.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set(transport.ImpersonateUserHeader, s.id.Username)
	for _, g := range s.id.Groups {
		req.Header.Add(transport.ImpersonateGroupHeader, g)
	}
	req.Header.Set(transport.ImpersonateUserExtraHeaderPrefix+url.PathEscape(LeaseKey), e.Lease.String())
	req.Header.Set(transport.ImpersonateUserExtraHeaderPrefix+url.PathEscape(EpochKey), e.String())
	return s.next.RoundTrip(req)
}

func (s *stamper) WrappedRoundTripper() http.RoundTripper { return s.next }

// NewClient returns c whose every write (create, update, patch, apply,
// delete, delete-all-of, and the same on subresources such as status)
// carries f's epoch at the moment it is called, and fails with [ErrNoEpoch]
// without a request when f holds none. Reads pass through unchanged. c must
// be built on a rest.Config from [Config], or the epoch never leaves the
// process.
func NewClient(c client.WithWatch, f *Fence) client.WithWatch {
	stamp := func(ctx context.Context) (context.Context, error) {
		e, ok := f.Epoch()
		if !ok {
			return ctx, ErrNoEpoch
		}
		return WithEpoch(ctx, e), nil
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			ctx, err := stamp(ctx)
			if err != nil {
				return err
			}
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
	})
}
