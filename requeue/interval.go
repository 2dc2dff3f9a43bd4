package requeue

import (
	"math"
	"math/rand/v2"
	"time"
)

// DefaultInterval replaces an interval that is nil, zero or negative. A zero
// RequeueAfter means "do not requeue", the silent end this package exists to
// prevent, so a misconfigured interval falls back to this value instead.
const DefaultInterval = 30 * time.Second

// Interval returns the delay before a requeue. It is called each time a result
// is built, never cached, so it can read a configuration that is reloaded
// while the controller runs:
//
//	requeue.Interval(func() time.Duration {
//		return r.ConfigManager.Get().SyncStatusCheckInterval
//	})
//
// It must be safe for concurrent use: controller workers call it in parallel.
// The zero value (nil) means [DefaultInterval].
type Interval func() time.Duration

// Duration calls i and returns its delay, or [DefaultInterval] when i is nil
// or returns zero or a negative duration. It never returns a non-positive
// duration.
func (i Interval) Duration() time.Duration {
	if i == nil {
		return DefaultInterval
	}
	if d := i(); d > 0 {
		return d
	}
	return DefaultInterval
}

// Fixed returns an Interval that always returns d, or [DefaultInterval] when
// d is zero or negative.
func Fixed(d time.Duration) Interval {
	if d <= 0 {
		d = DefaultInterval
	}
	return func() time.Duration { return d }
}

// JitterOption configures [Jitter].
type JitterOption interface {
	applyToJitter(*jitterConfig)
}

type jitterConfig struct {
	rand func() float64
}

// RandSource is a [JitterOption] that replaces the random source of Jitter,
// the package-level math/rand/v2 Float64 by default. It must return a number
// in [0, 1); values outside are clamped into it. Jitter calls it concurrently
// when the Interval is shared by workers, so a source built on a single
// *rand.Rand, as tests do with rand.New(rand.NewPCG(seed1, seed2)).Float64,
// must not be shared between goroutines.
type RandSource func() float64

func (r RandSource) applyToJitter(c *jitterConfig) {
	if r != nil {
		c.rand = r
	}
}

// Jitter returns an Interval that adds up to maxFactor times the delay of i:
// each call reads i (see [Interval.Duration]) and returns a duration in
// [d, d·(1+maxFactor)). Spreading requeues keeps a burst of objects that
// failed together from coming back together.
//
// Jitter never returns less than d, whatever maxFactor and the random source
// give. A maxFactor that is zero, negative or NaN adds nothing, and so does a
// draw of zero, even with a maxFactor of +Inf; a delay beyond the largest
// time.Duration (math.MaxInt64 nanoseconds) is capped there, so a positive
// draw with a maxFactor of +Inf gives that largest Duration.
func Jitter(i Interval, maxFactor float64, opts ...JitterOption) Interval {
	cfg := jitterConfig{rand: rand.Float64}
	for _, o := range opts {
		if o != nil {
			o.applyToJitter(&cfg)
		}
	}
	return func() time.Duration {
		d := i.Duration()
		if !(maxFactor > 0) { // also rejects NaN
			return d
		}
		f := cfg.rand()
		switch {
		case !(f > 0): // zero, negative or NaN: 0·Inf would be NaN
			return d
		case f >= 1:
			f = math.Nextafter(1, 0)
		}
		extra := f * maxFactor * float64(d) // positive, possibly +Inf
		// float64(math.MaxInt64) rounds up to 2^63, which does not convert
		// back to int64; the sum is checked in integers.
		if extra >= float64(math.MaxInt64) {
			return time.Duration(math.MaxInt64)
		}
		if e := time.Duration(extra); e <= time.Duration(math.MaxInt64)-d {
			return d + e
		}
		return time.Duration(math.MaxInt64)
	}
}
