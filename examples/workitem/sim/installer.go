// Package sim is the example's simulated installer: the external system a
// WorkItem controller installs payloads into and uninstalls them from.
//
// It never blocks a reconcile. Install and Uninstall start the work on first
// call and report it done once the configured duration has passed, like a
// job the controller polls. Both are idempotent per object UID, so a
// reconcile that runs twice, or a restarted manager, continues the same work.
package sim

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// ErrInstallFailed and ErrUninstallFailed are what chosen items fail with.
var (
	ErrInstallFailed   = errors.New("simulated install failure")
	ErrUninstallFailed = errors.New("simulated uninstall failure")
)

// Options configure an Installer.
type Options struct {
	// InstallDuration and UninstallDuration are how long the work takes.
	InstallDuration, UninstallDuration time.Duration
	// FailInstall and FailUninstall choose the items whose work fails.
	FailInstall, FailUninstall func(name string) bool
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// Installer simulates installs and uninstalls. It is safe for concurrent use.
type Installer struct {
	opts   Options
	caller string
	*state
}

// state is what every view of one installer shares.
type state struct {
	mu          sync.Mutex
	installs    map[types.UID]time.Time
	uninstalls  map[types.UID]time.Time
	uninstalled map[types.UID][]string // the caller told done, per report
}

// New returns an Installer.
func New(opts Options) *Installer {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Installer{
		opts: opts,
		state: &state{
			installs:    map[types.UID]time.Time{},
			uninstalls:  map[types.UID]time.Time{},
			uninstalled: map[types.UID][]string{},
		},
	}
}

// As returns a view of the same installer (same work, same counts) whose
// reports of a finished uninstall are recorded as made to caller: one
// view per controller replica tells which replica was told what.
func (in *Installer) As(caller string) *Installer {
	return &Installer{opts: in.opts, caller: caller, state: in.state}
}

// Install starts or polls the install of the named item. It returns done
// when the install has finished, or else how long until it will have.
func (in *Installer) Install(uid types.UID, name string) (done bool, wait time.Duration, err error) {
	done, wait = in.poll(in.installs, uid, in.opts.InstallDuration)
	if done && in.opts.FailInstall != nil && in.opts.FailInstall(name) {
		return true, 0, fmt.Errorf("install %s: %w", name, ErrInstallFailed)
	}
	return done, wait, nil
}

// Uninstall starts or polls the uninstall of the named item, like Install.
func (in *Installer) Uninstall(uid types.UID, name string) (done bool, wait time.Duration, err error) {
	done, wait = in.poll(in.uninstalls, uid, in.opts.UninstallDuration)
	if !done {
		return false, wait, nil
	}
	if in.opts.FailUninstall != nil && in.opts.FailUninstall(name) {
		return true, 0, fmt.Errorf("uninstall %s: %w", name, ErrUninstallFailed)
	}
	in.mu.Lock()
	in.uninstalled[uid] = append(in.uninstalled[uid], in.caller)
	in.mu.Unlock()
	return true, 0, nil
}

// Uninstalled reports how many times an uninstall of uid was reported done:
// more than once means a controller ran the delete flow twice.
func (in *Installer) Uninstalled(uid types.UID) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.uninstalled[uid])
}

// UninstalledBy names, in order, the callers (see As) each report that the
// uninstall of uid was done went to; "" for the Installer New returned.
func (in *Installer) UninstalledBy(uid types.UID) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.uninstalled[uid]...)
}

func (in *Installer) poll(started map[types.UID]time.Time, uid types.UID, d time.Duration) (bool, time.Duration) {
	now := in.opts.Clock.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	t0, ok := started[uid]
	if !ok {
		started[uid] = now
		t0 = now
	}
	if left := t0.Add(d).Sub(now); left > 0 {
		return false, left
	}
	return true, 0
}
