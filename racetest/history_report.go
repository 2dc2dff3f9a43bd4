package racetest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// CheckReport is what [CheckHistories] found for one subject.
type CheckReport struct {
	Subject   string
	Histories int
	// Violations counts the violations of each rule, over every history.
	Violations map[Rule]int
	// Failing counts the histories with at least one violation of each rule.
	Failing map[Rule]int
	// Reads counts the subject's reads; Refused those it refused.
	Reads, Refused int
	// ReadLatencies are the durations of the subject's reads, sorted.
	ReadLatencies []time.Duration
	// Reproducers holds, for each rule broken, the first failing history,
	// shrunk if CheckOptions.Shrink allowed it.
	Reproducers map[Rule]Reproducer
}

// Reproducer is a failing history, short enough to read.
type Reproducer struct {
	// Seed regenerates the history; Only are the indexes of the operations
	// kept (nil: all), for CheckOptions.Only.
	Seed uint64
	Only []int
	// Records are the operations of the shortest run that still broke the
	// rule, as they ran.
	Records []Record
	// Violation is the first violation of the rule in that run.
	Violation Violation
}

// String prints the reproducer: its seed, its operations, the violation.
func (r Reproducer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d", r.Seed)
	if r.Only != nil {
		fmt.Fprintf(&b, " ops %s", joinInts(r.Only))
	}
	b.WriteString(":\n")
	for _, rec := range r.Records {
		fmt.Fprintf(&b, "  %s\n", rec)
	}
	fmt.Fprintf(&b, "  => %s\n", r.Violation)
	return b.String()
}

// Quantile returns the q-quantile (0 to 1) of the read latencies, 0 without
// reads.
func (r *CheckReport) Quantile(q float64) time.Duration {
	if len(r.ReadLatencies) == 0 {
		return 0
	}
	i := int(q * float64(len(r.ReadLatencies)-1))
	return r.ReadLatencies[min(max(i, 0), len(r.ReadLatencies)-1)]
}

// CheckHistories runs opts.Histories generated histories of opts.Subject on
// the API server of opts.Config, opts.Parallel at a time, each in
// namespaces and a manager of its own, and checks each against the [Rules]. It returns
// an error only when it could not run a history; violations are in the
// report.
func CheckHistories(ctx context.Context, opts CheckOptions) (*CheckReport, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	env, err := newCheckEnv(o)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep := &CheckReport{Subject: o.Subject.Name, Violations: map[Rule]int{}, Failing: map[Rule]int{}, Reproducers: map[Rule]Reproducer{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := runAll(ctx, o, func(ctx context.Context, seed uint64) (*historyResult, error) {
		return env.runHistory(ctx, seed, generate(seed, o))
	})
	defer func() {
		cancel()
		for range results { // the runs still going end on the cancel
		}
	}()
	for i := range o.Histories {
		seed := o.Seed + uint64(i)
		ops := generate(seed, o)
		r := <-results
		if r.err != nil {
			return rep, r.err
		}
		h := r.h
		rep.add(h)
		if o.Log != nil {
			o.Log("%s history %d: %d ops, %d violations", o.Subject.Name, seed, len(ops), len(h.Violations))
		}
		for _, rule := range Rules {
			if _, done := rep.Reproducers[rule]; done {
				continue
			}
			if v, ok := first(h.Violations, rule); ok {
				rp, err := env.shrink(ctx, seed, ops, h, rule, v, o.Shrink)
				if err != nil {
					return rep, err
				}
				rep.Reproducers[rule] = rp
			}
		}
	}
	slices.Sort(rep.ReadLatencies)
	return rep, nil
}

// ranHistory is one history's run, or why it could not run.
type ranHistory struct {
	h   *historyResult
	err error
}

// runAll runs the o.Histories histories from o.Seed with run, o.Parallel at
// a time, and sends their results in seed order; the channel is closed
// after the last, or after the first that could not run.
func runAll(parent context.Context, o CheckOptions, run func(ctx context.Context, seed uint64) (*historyResult, error)) <-chan ranHistory {
	ctx, cancel := context.WithCancel(parent)
	out := make(chan ranHistory)
	// Each history's result has a slot of its own, filled when it ends.
	// A run starts once its slot is queued: the queue's Parallel-1 and the
	// one slot awaited bound the histories running to Parallel.
	slots := make(chan chan ranHistory, o.Parallel-1)
	go func() {
		defer close(slots)
		for i := range o.Histories {
			slot := make(chan ranHistory, 1)
			select {
			case slots <- slot:
			case <-ctx.Done():
				return
			}
			seed := o.Seed + uint64(i)
			go func() {
				h, err := run(ctx, seed)
				slot <- ranHistory{h: h, err: err}
			}()
		}
	}()
	go func() {
		defer close(out)
		defer cancel()
		stopped := false
		// Every slot is awaited, so that no run outlives the stream.
		for slot := range slots {
			r := <-slot
			if stopped {
				continue
			}
			select {
			case out <- r:
			case <-parent.Done():
			}
			if r.err != nil || parent.Err() != nil {
				stopped = true
				cancel()
			}
		}
	}()
	return out
}

func (r *CheckReport) add(h *historyResult) {
	r.Histories++
	broken := map[Rule]bool{}
	for _, v := range h.Violations {
		r.Violations[v.Rule]++
		broken[v.Rule] = true
	}
	for rule := range broken {
		r.Failing[rule]++
	}
	for _, rec := range h.Records {
		if rec.Op.Writer == WriterSubject && rec.Op.isRead() {
			r.Reads++
			if rec.Refused {
				r.Refused++
			}
			r.ReadLatencies = append(r.ReadLatencies, rec.End.Sub(rec.Start))
		}
	}
}

func first(vs []Violation, rule Rule) (Violation, bool) {
	for _, v := range vs {
		if v.Rule == rule {
			return v, true
		}
	}
	return Violation{}, false
}

// WriteCheckTable writes one row per report and rule: histories, histories
// failing the rule, violations, reads refused and the read latency p50 and
// p99, as a markdown table.
func WriteCheckTable(w io.Writer, reports []*CheckReport) error {
	var b strings.Builder
	b.WriteString("| subject | rule | histories | failing histories | violations | reads | refused | read p50 | read p99 |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range reports {
		for _, rule := range Rules {
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %s | %s |\n", r.Subject, rule, r.Histories,
				r.Failing[rule], r.Violations[rule], r.Reads, r.Refused,
				r.Quantile(0.5).Round(time.Microsecond), r.Quantile(0.99).Round(time.Microsecond))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
