package testenv

import (
	"reflect"
	"runtime"
	"strings"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// LeakOptions are the goleak options of a package whose tests run
// controllers or metadata-only informers: the goroutines that are not the
// tests' to stop, and nothing else.
//
//   - controller-runtime wraps a metadata-only informer's watch in
//     watch.Filter, whose loop blocks for good on an event that arrives as
//     the informer stops (kubernetes/kubernetes#113254).
//   - Before the fix of controller-runtime#3538 (PR #3540), a priority
//     queue's goroutines can deadlock on ShutDown: handleReadyItems sends a
//     ready item to a consumer that already left, holding the queue's lock,
//     and handleWaitingItems and handleAddBuffer wait on that lock for good.
//     Ignored only when the test binary links a controller-runtime older
//     than PriorityQueueFixed, the oldest release this project has read the
//     fix in; with a newer one (the race suite's) such a goroutine is a leak.
func LeakOptions() []goleak.Option {
	return leakOptions(controllerRuntimeVersion())
}

// PriorityQueueFixed is the controller-runtime release whose priority queue
// this project has read the ShutDown fix in (handleReadyItems selects on
// w.done as it hands an item over).
const PriorityQueueFixed = "v0.25.3"

// priorityQueueGoroutines are the functions a deadlocked queue's
// goroutines stop in.
var priorityQueueGoroutines = []string{
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleReadyItems",
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleWaitingItems",
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[...]).handleAddBuffer",
}

func leakOptions(crVersion string) []goleak.Option {
	opts := []goleak.Option{goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop")}
	if older(crVersion, PriorityQueueFixed) {
		for _, f := range priorityQueueGoroutines {
			opts = append(opts, goleak.IgnoreAnyFunction(f))
		}
	}
	return opts
}

// controllerRuntimeVersion is the version of controller-runtime linked
// into the running binary, read from the source path the compiler recorded
// for one of its functions (".../sigs.k8s.io/controller-runtime@v0.23.3/
// pkg/manager/manager.go", with or without -trimpath); "" where the path
// has no version (a vendored or replaced copy). A test binary's build info
// lists no dependencies, so it cannot say.
func controllerRuntimeVersion() string {
	file, _ := runtime.FuncForPC(reflect.ValueOf(manager.New).Pointer()).FileLine(0)
	return versionInPath(file, "sigs.k8s.io/controller-runtime@")
}

// versionInPath is the version after prefix in a module-cache path, up to
// the next slash, or "".
func versionInPath(file, prefix string) string {
	_, rest, ok := strings.Cut(file, prefix)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "/")
	return v
}

// older reports whether release version v is older than w, both semantic
// versions (a pre-release or build suffix is ignored). A version it cannot
// read is not older: the check stays strict.
func older(v, w string) bool {
	a, err := version.ParseSemantic(v)
	if err != nil {
		return false
	}
	b, err := version.ParseSemantic(w)
	if err != nil {
		return false
	}
	return release(a).LessThan(release(b))
}

// release is v without its pre-release and build suffixes.
func release(v *version.Version) *version.Version {
	return version.MajorMinor(v.Major(), v.Minor()).WithPatch(v.Patch())
}
