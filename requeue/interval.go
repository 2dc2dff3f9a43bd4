package requeue

import (
	"math"
	"math/big"
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
		return d + jitterAdded(d, f, maxFactor)
	}
}

// exactBelow is 2^53: integers below it are exact in a float64.
const exactBelow = 1 << 53

// jitterAdded returns the whole nanoseconds below f·maxFactor·d, computed so
// that d plus the result stays below d·(1+maxFactor) and within the largest
// Duration. d is positive, f in (0, 1), maxFactor positive and maybe +Inf.
func jitterAdded(d time.Duration, f, maxFactor float64) time.Duration {
	room := time.Duration(math.MaxInt64) - d
	width := maxFactor * float64(d) // the jitter's range, possibly +Inf
	if width >= float64(room) {     // also +Inf; float64(room) may round up
		// Past the largest Duration, or too close to it to tell in float64.
		if e, ok := exactAdded(d, f, maxFactor); ok && e <= room {
			return e
		}
		return room
	}
	if d >= exactBelow || width >= exactBelow {
		e, _ := exactAdded(d, f, maxFactor)
		return e
	}
	// Below 2^53 everything is exact but the two products, each rounded by
	// less than a nanosecond; truncating keeps the result below the exact
	// width unless width rounded to a whole number.
	e := time.Duration(f * width)
	if w := time.Duration(width); e >= w && float64(w) == width {
		e = w - 1
	}
	return e
}

// exactAdded computes floor(f·maxFactor·d) without rounding; ok is false when
// it does not fit an int64.
func exactAdded(d time.Duration, f, maxFactor float64) (time.Duration, bool) {
	if math.IsInf(maxFactor, 1) {
		return 0, false
	}
	const prec = 256 // f·maxFactor·d needs at most 53+53+63 bits
	x := new(big.Float).SetPrec(prec).SetFloat64(f)
	x.Mul(x, new(big.Float).SetPrec(prec).SetFloat64(maxFactor))
	x.Mul(x, new(big.Float).SetPrec(prec).SetInt64(int64(d)))
	e, acc := x.Int64() // truncates towards zero: the floor, x being positive
	if acc == big.Above || (e == math.MaxInt64 && acc == big.Below) {
		return 0, false
	}
	return time.Duration(e), true
}
