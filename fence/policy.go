package fence

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// ErrInvalidPolicy means [PolicyOptions] cannot build a policy; the
// returned error says which field.
var ErrInvalidPolicy = errors.New("fence: invalid policy options")

// PolicyOptions describe what a controller's fence guards.
type PolicyOptions struct {
	// Name names the ValidatingAdmissionPolicy and, with the lease's name,
	// its binding. Required.
	Name string
	// Resources are the guarded kinds, as group and plural resource ("" for
	// the core group). Every subresource of each is guarded too. Required.
	Resources []schema.GroupResource
	// Users are the usernames (such as
	// "system:serviceaccount:ns:controller") whose writes to Resources must
	// carry the current epoch even when they carry none: a write of theirs
	// that bypasses the fenced client is refused. Empty: only writes that
	// carry this lease's key are checked, so an unfenced client of the
	// same user goes through.
	Users []string
}

func (o PolicyOptions) validate() error {
	if o.Name == "" {
		return fmt.Errorf("%w: Name is empty", ErrInvalidPolicy)
	}
	if len(o.Resources) == 0 {
		return fmt.Errorf("%w: no Resources", ErrInvalidPolicy)
	}
	for _, r := range o.Resources {
		if r.Resource == "" || strings.Contains(r.Resource, "/") {
			return fmt.Errorf("%w: resource %q: want a plural name without subresource", ErrInvalidPolicy, r.String())
		}
	}
	return nil
}

// The policy's CEL. A request is this lease's when it carries the lease's
// key with the lease's namespace/name; params is the Lease the binding
// names, read by the API server from its own informer.
const (
	celStampedLease = `'` + LeaseKey + `' in request.userInfo.extra ? request.userInfo.extra['` + LeaseKey + `'] : []`
	celThisLease    = `[params.metadata.namespace + '/' + params.metadata.name]`
	celCurrent      = `[(has(params.spec.holderIdentity) ? params.spec.holderIdentity : '') + '#' + string(has(params.spec.leaseTransitions) ? params.spec.leaseTransitions : 0)]`
	celStampedEpoch = `'` + EpochKey + `' in request.userInfo.extra ? request.userInfo.extra['` + EpochKey + `'] : []`
)

// Policy returns the ValidatingAdmissionPolicy that refuses a write to
// o.Resources fenced by the bound lease (or, with o.Users, any write of
// those users) whose epoch is not the lease's current holder and
// leaseTransitions. Bind it to each lease with [Binding].
func Policy(o PolicyOptions) (*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	var rules []admissionregistrationv1.NamedRuleWithOperations
	byGroup := map[string][]string{}
	var groups []string
	for _, r := range o.Resources {
		if _, ok := byGroup[r.Group]; !ok {
			groups = append(groups, r.Group)
		}
		byGroup[r.Group] = append(byGroup[r.Group], r.Resource, r.Resource+"/*")
	}
	slices.Sort(groups)
	for _, g := range groups {
		res := byGroup[g]
		slices.Sort(res)
		res = slices.Compact(res)
		rules = append(rules, admissionregistrationv1.NamedRuleWithOperations{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{g},
					APIVersions: []string{"*"},
					Resources:   res,
					Scope:       ptr.To(admissionregistrationv1.AllScopes),
				},
			},
		})
	}
	mine := `variables.stampedLease == ` + celThisLease
	carries := `'` + LeaseKey + `' in request.userInfo.extra`
	if len(o.Users) > 0 {
		users := slices.Clone(o.Users)
		slices.Sort(users)
		quoted := make([]string, len(users))
		for i, u := range users {
			quoted[i] = strconv.Quote(u)
		}
		in := `request.userInfo.username in [` + strings.Join(quoted, ", ") + `]`
		mine = `(` + mine + ` || ` + in + `)`
		carries += ` || ` + in
	}
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: rules,
			},
			// Without params, so that a missing Lease (the binding denies
			// then) refuses only fenced writes, never another user's.
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "fenced", Expression: carries}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "stampedLease", Expression: celStampedLease},
				{Name: "stampedEpoch", Expression: celStampedEpoch},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        `!(` + mine + `) || variables.stampedEpoch == ` + celCurrent,
				MessageExpression: `'fenced: epoch ' + (size(variables.stampedEpoch) > 0 ? variables.stampedEpoch[0] : '(none)') + ' is not the current epoch of lease ' + params.metadata.namespace + '/' + params.metadata.name`,
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}, nil
}

// IsFenced reports whether err is the policy's refusal: a 403 Forbidden
// whose message names the fence. A fenced write is never retried by
// conflict loops (it is not a 409); the caller should stop acting.
func IsFenced(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "fenced: epoch ")
}

// Binding returns the binding of the policy named policy to lease: the
// policy reads that Lease as its params and denies every write it matches
// while the Lease does not exist. Bind each lease (each shard) once.
func Binding(policy string, lease types.NamespacedName) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: policy + "." + lease.Namespace + "." + lease.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy,
			ParamRef: &admissionregistrationv1.ParamRef{
				Name:                    lease.Name,
				Namespace:               lease.Namespace,
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction),
			},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

// Manifest returns the policy of o and one binding per lease as a YAML
// stream, for kubectl apply or a kustomization.
func Manifest(o PolicyOptions, leases ...types.NamespacedName) ([]byte, error) {
	p, err := Policy(o)
	if err != nil {
		return nil, err
	}
	objs := []any{p}
	for _, l := range leases {
		objs = append(objs, Binding(p.Name, l))
	}
	var out []byte
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("fence: manifest: %w", err)
		}
		out = append(out, "---\n"...)
		out = append(out, b...)
	}
	return out, nil
}
