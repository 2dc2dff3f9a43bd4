package requeue

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

func TestIntervalDuration(t *testing.T) {
	tests := []struct {
		name string
		i    Interval
		want time.Duration
	}{
		{"nil", nil, DefaultInterval},
		{"fixed", Fixed(5 * time.Second), 5 * time.Second},
		{"fixed zero", Fixed(0), DefaultInterval},
		{"fixed negative", Fixed(-time.Second), DefaultInterval},
		{"func zero", func() time.Duration { return 0 }, DefaultInterval},
		{"func negative", func() time.Duration { return -3 * time.Second }, DefaultInterval},
		{"func positive", func() time.Duration { return time.Nanosecond }, time.Nanosecond},
		{"fixed largest", Fixed(math.MaxInt64), math.MaxInt64},
		{"fixed most negative", Fixed(math.MinInt64), DefaultInterval},
		{"func most negative", func() time.Duration { return math.MinInt64 }, DefaultInterval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.i.Duration(); got != tt.want {
				t.Errorf("Duration() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFixedNeverReturnsNonPositive(t *testing.T) {
	// Called directly, not through Duration: a caller that builds its own
	// Result from i() must not get a zero either.
	if got := Fixed(0)(); got != DefaultInterval {
		t.Errorf("Fixed(0)() = %v, want %v", got, DefaultInterval)
	}
}

// config stands in for a hot-reloaded configuration such as the incident's
// r.ConfigManager.Get().SyncStatusCheckInterval.
type config struct{ syncStatusCheckInterval time.Duration }

func TestIntervalReadAtCallTime(t *testing.T) {
	cfg := &config{syncStatusCheckInterval: 10 * time.Second}
	i := Interval(func() time.Duration { return cfg.syncStatusCheckInterval })
	fixedSource := RandSource(func() float64 { return 0.5 })
	jittered := Jitter(i, 1, fixedSource)

	check := func(want time.Duration) {
		t.Helper()
		if res, err := AfterInterval(i); err != nil || res.RequeueAfter != want {
			t.Errorf("AfterInterval = %+v, %v; want RequeueAfter %v, nil", res, err, want)
		}
		if got, wantJ := jittered(), want+want/2; got != wantJ {
			t.Errorf("Jitter(i, 1) with source 0.5 = %v, want %v", got, wantJ)
		}
	}
	check(10 * time.Second)
	cfg.syncStatusCheckInterval = 2 * time.Second
	check(2 * time.Second)
	cfg.syncStatusCheckInterval = 0 // a broken reload must not stop requeues
	check(DefaultInterval)
}

func TestJitterBounds(t *testing.T) {
	const (
		base      = 10 * time.Second
		maxFactor = 0.5
		draws     = 10000
	)
	src := rand.New(rand.NewPCG(1, 2))
	i := Jitter(Fixed(base), maxFactor, RandSource(src.Float64))
	upper := base + time.Duration(maxFactor*float64(base))
	lo, hi := upper, time.Duration(0)
	for range draws {
		d := i()
		if d < base || d >= upper {
			t.Fatalf("Jitter drew %v, want in [%v, %v)", d, base, upper)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	// With 10000 uniform draws, the extremes come within 1% of the bounds; a
	// Jitter that adds nothing, or only half of maxFactor, fails here.
	if lo > base+base/100 || hi < upper-base/100 {
		t.Errorf("draws span [%v, %v], want close to [%v, %v)", lo, hi, base, upper)
	}
}

func TestJitterClampsSourceAndFactor(t *testing.T) {
	const base = time.Second
	tests := []struct {
		name      string
		source    float64
		maxFactor float64
		want      time.Duration
	}{
		{"zero draw", 0, 1, base},
		{"half draw", 0.5, 1, base + base/2},
		{"draw of 1 stays below the bound", 1, 1, 2*base - 1},
		{"draw above 1", 5, 1, 2*base - 1},
		{"negative draw", -1, 1, base},
		{"NaN draw", math.NaN(), 1, base},
		{"zero factor", 0.5, 0, base},
		{"negative factor", 0.5, -2, base},
		{"NaN factor", 0.5, math.NaN(), base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := RandSource(func() float64 { return tt.source })
			if got := Jitter(Fixed(base), tt.maxFactor, src)(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestJitterCapsOverflow(t *testing.T) {
	src := RandSource(func() float64 { return 0.9 })
	huge := Fixed(time.Duration(math.MaxInt64 / 2))
	if got := Jitter(huge, 10, src)(); got != time.Duration(math.MaxInt64) {
		t.Errorf("got %v, want the largest Duration", got)
	}
}

func TestJitterDefaultSource(t *testing.T) {
	var noSource RandSource // a nil option keeps the default source
	i := Jitter(nil, 0.1, noSource, nil)
	for range 100 {
		if d := i(); d < DefaultInterval || d >= DefaultInterval+DefaultInterval/10 {
			t.Fatalf("drew %v, want in [%v, %v)", d, DefaultInterval, DefaultInterval+DefaultInterval/10)
		}
	}
}

// TestJitterNeverBelowIntervalNorOverflows drives Jitter with the extreme
// factors, draws and intervals: whatever they are, the delay is at least the
// interval it jitters and at most the largest Duration. A factor that adds
// nothing, or a draw that does, gives the interval exactly; a positive draw on
// an unbounded range saturates.
func TestJitterNeverBelowIntervalNorOverflows(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	factors := []float64{
		math.Inf(1), math.Inf(-1), math.NaN(), -1, -math.MaxFloat64, 0,
		math.SmallestNonzeroFloat64, 0.5, 1, 1e9, 1e300, math.MaxFloat64,
	}
	draws := []float64{
		0, math.SmallestNonzeroFloat64, 0.5, math.Nextafter(1, 0), 1, 2,
		-1, math.NaN(), math.Inf(1), math.Inf(-1),
	}
	intervals := []time.Duration{
		time.Nanosecond, 2 * time.Minute, maxDuration / 2, maxDuration - 1, maxDuration,
	}
	for _, d := range intervals {
		for _, factor := range factors {
			for _, draw := range draws {
				src := RandSource(func() float64 { return draw })
				got := Jitter(Fixed(d), factor, src)()
				if got < d {
					t.Errorf("Jitter(Fixed(%d), %v) with draw %v = %d, below the interval", d, factor, draw, got)
				}
				addsNothing := !(factor > 0) || !(draw > 0)
				if addsNothing && got != d {
					t.Errorf("Jitter(Fixed(%d), %v) with draw %v = %d, want the interval %d", d, factor, draw, got, d)
				}
				if math.IsInf(factor, 1) && draw > 0 && got != maxDuration {
					t.Errorf("Jitter(Fixed(%d), +Inf) with draw %v = %d, want the largest Duration", d, draw, got)
				}
			}
		}
	}
}

// TestJitterInfiniteFactorZeroDraw: an unbounded factor with a draw of 0 adds
// nothing (0·Inf is not a number, and must not become one).
func TestJitterInfiniteFactorZeroDraw(t *testing.T) {
	src := RandSource(func() float64 { return 0 })
	i := Jitter(Fixed(2*time.Minute), math.Inf(1), src)
	if got := i(); got != 2*time.Minute {
		t.Errorf("i() = %v, want 2m0s", got)
	}
	if got := i.Duration(); got != 2*time.Minute {
		t.Errorf("i.Duration() = %v, want 2m0s", got)
	}
}

// TestJitterStaysBelowItsBound: the largest draw stays below d·(1+maxFactor),
// computed exactly, not in the float64 arithmetic of the delay, for intervals
// and factors of every magnitude.
func TestJitterStaysBelowItsBound(t *testing.T) {
	largestDraw := RandSource(func() float64 { return math.Nextafter(1, 0) })
	check := func(d time.Duration, m float64) {
		t.Helper()
		got := Jitter(Fixed(d), m, largestDraw)()
		width := new(big.Float).SetPrec(256).SetFloat64(m)
		width.Mul(width, new(big.Float).SetPrec(256).SetInt64(int64(d)))
		added := new(big.Float).SetPrec(256).SetInt64(int64(got - d))
		if got < d || (added.Cmp(width) >= 0 && got != math.MaxInt64) {
			t.Errorf("Jitter(Fixed(%d), %v) with the largest draw = %d, want in [%d, %d + %s)",
				d, m, got, d, d, width.Text('f', 3))
		}
	}
	for _, m := range []float64{0.1, 0.2, 0.25, 1.0 / 3, 0.5, 1, 1.5, 3, 10, 1e6} {
		for d := time.Duration(1); d < math.MaxInt64/4; d = d*3 + 7 {
			check(d, m)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		d := time.Duration(r.Int64N(1<<uint(1+r.IntN(62)))) + 1
		m := math.Ldexp(r.Float64(), r.IntN(40)-20)
		if m > 0 {
			check(d, m)
		}
	}
}
