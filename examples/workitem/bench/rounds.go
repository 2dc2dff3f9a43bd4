package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
)

// A cell's controllers run one after another on one control plane, and a
// later run meets a server that has taken more writes (etcd grows, the
// previous runs' namespaces are still being emptied): one run per cell in a
// fixed order favours the controllers that come first. With several rounds,
// the order alternates: an odd round runs the cell backwards, so over any two
// rounds each controller runs both before and after each other one; every
// second round also starts one controller later. The drop-in port is then
// compared with its peers round by round, run against run.

// order is the cell's controllers in round r: ks rotated by r/2, reversed
// when r is odd.
func order(ks []scenario.Kind, r int) []scenario.Kind {
	if len(ks) == 0 {
		return nil
	}
	k := (r / 2) % len(ks)
	o := append(slices.Clone(ks[k:]), ks[:k]...)
	if r%2 == 1 {
		slices.Reverse(o)
	}
	return o
}

// roundRun is one controller's burst in one round.
type roundRun struct {
	round int
	rep   scenario.Report
}

// cellKey names a cell of the matrix.
type cellKey struct {
	items int
	lag   time.Duration
}

// roundRatio is, for one cell, the drop-in port's items/s over a peer's in
// each round, and their median.
type roundRatio struct {
	peer   scenario.Kind
	ratios []float64 // one per round in which both finished
}

func (r roundRatio) median() float64 { return median(r.ratios) }

// geoMean is the geometric mean of the ratios with a two-sided 95%
// confidence interval (Student's t on the logarithms, the rounds taken as
// independent pairs). ok is false with fewer than two ratios, or when a
// round's ratio is 0 (the drop-in port deleted nothing): a mean of logs has
// no value then, and the median and lowest already show that round.
func (r roundRatio) geoMean() (mean, lo, hi float64, ok bool) {
	n := len(r.ratios)
	if n < 2 || slices.Min(r.ratios) <= 0 {
		return 0, 0, 0, false
	}
	var sum float64
	logs := make([]float64, n)
	for i, x := range r.ratios {
		logs[i] = math.Log(x)
		sum += logs[i]
	}
	m := sum / float64(n)
	var ss float64
	for _, l := range logs {
		ss += (l - m) * (l - m)
	}
	half := t975(n-1) * math.Sqrt(ss/float64(n-1)/float64(n))
	return math.Exp(m), math.Exp(m - half), math.Exp(m + half), true
}

// t975 is the 97.5th percentile of Student's t with df degrees of freedom
// (df >= 1); beyond 30, the normal's 1.96.
func t975(df int) float64 {
	table := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df >= 1 && df <= len(table) {
		return table[df-1]
	}
	return 1.96
}

// ratiosOf pairs the drop-in port's run with each peer's run of the same
// round in one cell. A round in which either did not finish is left out.
func ratiosOf(runs []roundRun, cell cellKey, of scenario.Kind, peers []scenario.Kind) []roundRatio {
	byRound := map[int]map[scenario.Kind]scenario.Report{}
	for _, r := range runs {
		if r.rep.Items != cell.items || r.rep.Lag != cell.lag || r.rep.Error != "" {
			continue
		}
		if byRound[r.round] == nil {
			byRound[r.round] = map[scenario.Kind]scenario.Report{}
		}
		byRound[r.round][r.rep.Controller] = r.rep
	}
	rounds := make([]int, 0, len(byRound))
	for n := range byRound {
		rounds = append(rounds, n)
	}
	slices.Sort(rounds)
	var out []roundRatio
	for _, p := range peers {
		rr := roundRatio{peer: p}
		for _, n := range rounds {
			mine, ok1 := byRound[n][of]
			theirs, ok2 := byRound[n][p]
			if ok1 && ok2 && theirs.Throughput() > 0 {
				rr.ratios = append(rr.ratios, mine.Throughput()/theirs.Throughput())
			}
		}
		out = append(out, rr)
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeRounds prints, per cell, every controller's items/s in each round
// with the median, then the drop-in port's ratio to the full port and to the
// post-mortem's hand fix, round by round, with the ratios' median, lowest
// and geometric mean. The mean's 95% interval says whether a cell's rounds
// tell the two controllers apart at all: an interval that holds 1.00 is a
// tie at this many rounds.
func writeRounds(w io.Writer, runs []roundRun, rounds int) {
	var cells []cellKey
	var kinds []scenario.Kind
	for _, r := range runs {
		c := cellKey{r.rep.Items, r.rep.Lag}
		if !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
		if !slices.Contains(kinds, r.rep.Controller) {
			kinds = append(kinds, r.rep.Controller)
		}
	}
	fmt.Fprintf(w, "items/s in each of %d rounds (an odd round runs the cell backwards), and the median:\n\n", rounds)
	fmt.Fprint(w, "| controller | items | lag |")
	for n := range rounds {
		fmt.Fprintf(w, " round %d |", n+1)
	}
	fmt.Fprintln(w, " median |")
	fmt.Fprintln(w, "|---|---:|---:|"+strings.Repeat("---:|", rounds+1))
	for _, c := range cells {
		for _, k := range kinds {
			var xs []float64
			cols := make([]string, rounds)
			for i := range cols {
				cols[i] = "-"
			}
			for _, r := range runs {
				if r.rep.Controller != k || r.rep.Items != c.items || r.rep.Lag != c.lag || r.round >= rounds {
					continue
				}
				if r.rep.Error != "" {
					cols[r.round] = "failed"
					continue
				}
				cols[r.round] = strconv.FormatFloat(r.rep.Throughput(), 'f', 1, 64)
				xs = append(xs, r.rep.Throughput())
			}
			if len(xs) == 0 && !slices.Contains(cols, "failed") {
				continue
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %.1f |\n", k, c.items, c.lag, strings.Join(cols, " | "), median(xs))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s against its peers, items/s over the peer's in the same round:\n\n", scenario.NaiveClient)
	fmt.Fprintln(w, "| items | lag | peer | per round | median | lowest | geometric mean (95% interval) |")
	fmt.Fprintln(w, "|---:|---:|---|---|---:|---:|---:|")
	for _, c := range cells {
		for _, rr := range ratiosOf(runs, c, scenario.NaiveClient, []scenario.Kind{scenario.Racesafe, scenario.NaiveFix2}) {
			if len(rr.ratios) == 0 {
				continue
			}
			per := make([]string, len(rr.ratios))
			for i, x := range rr.ratios {
				per[i] = strconv.FormatFloat(x, 'f', 2, 64)
			}
			gm := "-"
			if m, lo, hi, ok := rr.geoMean(); ok {
				gm = fmt.Sprintf("%.2fx (%.2f-%.2f)", m, lo, hi)
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %.2fx | %.2fx | %s |\n", c.items, c.lag, rr.peer, strings.Join(per, ", "), rr.median(), slices.Min(rr.ratios), gm)
		}
	}
}
