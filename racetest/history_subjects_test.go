package racetest_test

import (
	"errors"
	"fmt"
	"reflect"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/racesafe/racesafe/expectations"
	"github.com/racesafe/racesafe/racetest"
)

// The subjects the checker's tests and `make check-histories` run, by name.
const (
	subjectCache      = "cache"
	subjectRacesafe   = "racesafe"
	subjectRYW        = "controller-runtime-ryw"
	subjectRYWMultiNS = "controller-runtime-ryw-multi-namespace"
	subjectRYWLabels  = "controller-runtime-ryw-label-selected"
)

// allSubjects are every subject, in the order reports list them.
var allSubjects = []string{subjectCache, subjectRacesafe, subjectRYW, subjectRYWMultiNS, subjectRYWLabels}

// errNoRYW means this build's controller-runtime has no read-your-writes
// cache option (it has from v0.25; go.mod requires v0.23).
var errNoRYW = errors.New("controller-runtime before v0.25 has no CacheOptions.EnableReadYourWritesConsistency: run with -modfile=hack/newest.mod")

// newRacesafeClient is the one place the racesafe subject is built: the
// drop-in Client on the manager's client, as docs/adopting.md ports a
// controller.
func newRacesafeClient(mgr manager.Manager) (client.Client, error) {
	return expectations.ForManager(mgr, expectations.ClientOptions{})
}

// subject returns the subject called name, or errNoRYW for a
// controller-runtime subject this build cannot configure.
func subject(name string) (racetest.Subject, error) {
	switch name {
	case subjectCache:
		return racetest.Subject{Name: name}, nil
	case subjectRacesafe:
		return racetest.Subject{
			Name:    name,
			Client:  newRacesafeClient,
			Refused: func(err error) bool { return errors.Is(err, expectations.ErrStale) },
		}, nil
	case subjectRYW, subjectRYWMultiNS, subjectRYWLabels:
		if err := readYourWrites(&client.CacheOptions{}); err != nil {
			return racetest.Subject{}, err
		}
		s := racetest.Subject{Name: name, Configure: func(o *manager.Options) error {
			cacheOpts := *o.Client.Cache
			if err := readYourWrites(&cacheOpts); err != nil {
				return err
			}
			o.Client.Cache = &cacheOpts
			if name == subjectRYWLabels {
				sel, err := labels.Parse(racetest.CheckerTierLabel + " in (a,b)")
				if err != nil {
					return fmt.Errorf("cache selector: %w", err)
				}
				o.Cache.ByObject = map[client.Object]cache.ByObject{&policyv1.PodDisruptionBudget{}: {Label: sel}}
			}
			return nil
		}}
		if name == subjectRYWMultiNS {
			s.Namespaces = 2
		}
		return s, nil
	}
	return racetest.Subject{}, fmt.Errorf("no subject %q (subjects: %v)", name, allSubjects)
}

// readYourWrites turns on controller-runtime's read-your-writes cache
// option, set by name: it exists from controller-runtime v0.25, and the
// library builds against v0.23 too.
func readYourWrites(o *client.CacheOptions) error {
	f := reflect.ValueOf(o).Elem().FieldByName("EnableReadYourWritesConsistency")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*bool]() {
		return errNoRYW
	}
	f.Set(reflect.ValueOf(ptr.To(true)))
	return nil
}
