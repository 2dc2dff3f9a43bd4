// Package settings is the example's hot-reloadable configuration, the
// stand-in for the incident's ConfigManager: readers call Get on every use, so
// a change takes effect without a restart.
package settings

import (
	"sync/atomic"
	"time"
)

// Settings are the controller's tunables.
type Settings struct {
	// SyncStatusCheckInterval is how soon an item in an unknown or unsettled
	// state is looked at again.
	SyncStatusCheckInterval time.Duration
}

// Default is what a Manager holds until Set is called.
var Default = Settings{SyncStatusCheckInterval: 2 * time.Second}

// Manager holds the current Settings. Its zero value holds Default.
type Manager struct {
	cur atomic.Pointer[Settings]
}

// Get returns the current settings.
func (m *Manager) Get() Settings {
	if s := m.cur.Load(); s != nil {
		return *s
	}
	return Default
}

// Set replaces the current settings.
func (m *Manager) Set(s Settings) { m.cur.Store(&s) }

// SyncStatusCheckInterval reads the interval at call time; it fits
// requeue.Interval.
func (m *Manager) SyncStatusCheckInterval() time.Duration {
	return m.Get().SyncStatusCheckInterval
}
