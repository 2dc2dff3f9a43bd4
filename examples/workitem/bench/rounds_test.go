package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
)

func TestOrderRunsEachPairBothWaysOverTwoRounds(t *testing.T) {
	ks := []scenario.Kind{scenario.NaiveFix2, scenario.NaiveRYW, scenario.Racesafe, scenario.NaiveClient}
	for r := range 2 * len(ks) {
		o := order(ks, r)
		if len(o) != len(ks) {
			t.Fatalf("round %d: %v, want the %d controllers", r, o, len(ks))
		}
		for _, k := range ks {
			if !slices.Contains(o, k) {
				t.Errorf("round %d: %v lacks %s", r, o, k)
			}
		}
		if r%2 == 0 {
			continue
		}
		// Rounds r-1 and r: every pair both ways.
		prev := order(ks, r-1)
		for i, a := range ks {
			for _, b := range ks[i+1:] {
				before := func(o []scenario.Kind) bool { return slices.Index(o, a) < slices.Index(o, b) }
				if before(prev) == before(o) {
					t.Errorf("rounds %d and %d (%v, %v): %s runs on the same side of %s in both", r-1, r, prev, o, a, b)
				}
			}
		}
	}
	firsts := map[scenario.Kind]bool{}
	for r := 0; r < 2*len(ks); r += 2 {
		firsts[order(ks, r)[0]] = true
	}
	if len(firsts) != len(ks) {
		t.Errorf("even rounds start at %v, want every controller once", firsts)
	}
	if order(nil, 3) != nil {
		t.Error("order of no controllers is not empty")
	}
}

// run makes a report of n items deleted in elapsed.
func run(round int, k scenario.Kind, lag time.Duration, n int, elapsed time.Duration) roundRun {
	return roundRun{round: round, rep: scenario.Report{Controller: k, Items: n, Lag: lag, Deleted: n, Elapsed: elapsed}}
}

func TestRatiosPairRunsOfTheSameRound(t *testing.T) {
	runs := []roundRun{
		run(0, scenario.NaiveFix2, 0, 100, time.Second),             // 100 items/s
		run(0, scenario.NaiveClient, 0, 100, 2*time.Second),         // 50
		run(1, scenario.NaiveClient, 0, 100, time.Second),           // 100
		run(1, scenario.NaiveFix2, 0, 100, 2*time.Second),           // 50
		run(2, scenario.NaiveClient, 0, 100, time.Second),           // 100
		run(2, scenario.NaiveFix2, 0, 100, time.Second),             // 100
		run(0, scenario.NaiveFix2, time.Second, 100, 4*time.Second), // another cell
	}
	failed := run(3, scenario.NaiveFix2, 0, 100, time.Second)
	failed.rep.Error = "setup deadline"
	runs = append(runs, failed, run(3, scenario.NaiveClient, 0, 100, time.Second))

	rr := ratiosOf(runs, cellKey{100, 0}, scenario.NaiveClient, []scenario.Kind{scenario.NaiveFix2, scenario.Racesafe})
	if len(rr) != 2 || rr[0].peer != scenario.NaiveFix2 || rr[1].peer != scenario.Racesafe {
		t.Fatalf("ratios %+v, want one per peer in the order asked", rr)
	}
	if want := []float64{0.5, 2, 1}; !slices.Equal(rr[0].ratios, want) {
		t.Errorf("against naive+fix2: %v, want %v (round by round, the failed round left out)", rr[0].ratios, want)
	}
	if rr[0].median() != 1 {
		t.Errorf("median %v, want 1", rr[0].median())
	}
	if len(rr[1].ratios) != 0 {
		t.Errorf("against racesafe, which never ran: %v", rr[1].ratios)
	}

	var b strings.Builder
	writeRounds(&b, runs, 4)
	out := b.String()
	for _, want := range []string{
		"| naive+fix2 | 100 | 0s | 100.0 | 50.0 | 100.0 | failed | 100.0 |",
		"| naive+client | 100 | 0s | 50.0 | 100.0 | 100.0 | 100.0 | 100.0 |",
		"| naive+fix2 | 100 | 1s | 25.0 | - | - | - | 25.0 |",
		"| 100 | 0s | naive+fix2 | 0.50, 2.00, 1.00 | 1.00x | 0.50x | 1.00x (0.18-5.60) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rounds table lacks %q:\n%s", want, out)
		}
	}
}

func TestGeoMeanInterval(t *testing.T) {
	if _, _, _, ok := (roundRatio{ratios: []float64{1.2}}).geoMean(); ok {
		t.Error("one round gave an interval")
	}
	// A round in which the drop-in port deleted nothing: no mean of logs,
	// rather than NaN in the table.
	if m, lo, hi, ok := (roundRatio{ratios: []float64{0, 1, 1.2}}).geoMean(); ok {
		t.Errorf("a zero ratio gave %v (%v-%v)", m, lo, hi)
	}
	// Ratios e^0.1 and e^-0.1 around 1: mean 1, the log's sample standard
	// deviation sqrt(0.02), its standard error 0.1, and t(1) = 12.706.
	m, lo, hi, ok := (roundRatio{ratios: []float64{math.Exp(0.1), math.Exp(-0.1)}}).geoMean()
	if !ok || math.Abs(m-1) > 1e-9 || math.Abs(lo-math.Exp(-1.2706)) > 1e-9 || math.Abs(hi-math.Exp(1.2706)) > 1e-9 {
		t.Errorf("geoMean = %v (%v-%v) %v, want 1 (%v-%v)", m, lo, hi, ok, math.Exp(-1.2706), math.Exp(1.2706))
	}
	// Equal ratios: no spread, the interval is the point.
	m, lo, hi, _ = (roundRatio{ratios: []float64{1.1, 1.1, 1.1}}).geoMean()
	if math.Abs(m-1.1) > 1e-9 || math.Abs(lo-1.1) > 1e-9 || math.Abs(hi-1.1) > 1e-9 {
		t.Errorf("geoMean of 1.1 three times = %v (%v-%v)", m, lo, hi)
	}
	if t975(0) != 1.96 || t975(31) != 1.96 || t975(10) != 2.228 {
		t.Errorf("t975: %v %v %v", t975(0), t975(31), t975(10))
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
