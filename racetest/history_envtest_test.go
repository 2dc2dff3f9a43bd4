package racetest_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

// checkLag is the lag of the subjects' caches in the checker's tests: 50 to
// 150 ms, wide enough that a read right after a write finds the cache
// behind.
var checkLag = racetest.LagOptions{
	Delay:  50 * time.Millisecond,
	Jitter: func() time.Duration { return time.Duration(rand.IntN(100)) * time.Millisecond }, //nolint:gosec // a lag, not a secret
}

// checkOptions are the options of a run of subject name: a lagged cache,
// and one subject write in twenty ambiguous.
func checkOptions(cfg *rest.Config, s racetest.Subject, seed uint64, histories int) racetest.CheckOptions {
	return racetest.CheckOptions{
		Config: cfg, Subject: s, Seed: seed, Histories: histories,
		Lag: checkLag, Ambiguous: 0.05, OpTimeout: 3 * time.Second,
	}
}

// TestCheckHistories runs a short seeded budget of histories per subject on
// one control plane: the manager's plain cache must be caught breaking
// read-your-writes (proof that the checker sees it), and the racesafe
// Client, in its own clearly named subtest, must break nothing.
func TestCheckHistories(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	t.Run("CacheSubjectIsCaught", func(t *testing.T) {
		s, _ := subject(subjectCache)
		o := checkOptions(env.Config, s, 1, 6)
		o.Shrink = 12
		rep := runCheck(t, o)
		if rep.Violations[racetest.RuleReadYourWrites] == 0 {
			t.Fatalf("the plain cache broke no read-your-writes in %d histories: the checker does not see stale reads", rep.Histories)
		}
		rp := rep.Reproducers[racetest.RuleReadYourWrites]
		if len(rp.Records) == 0 || rp.Violation.Rule != racetest.RuleReadYourWrites {
			t.Fatalf("no reproducer for read-your-writes: %+v", rp)
		}
		t.Logf("shrunk reproducer (%d ops):\n%s", len(rp.Records), rp)
	})
	t.Run("RacesafeClientHasNoViolations", func(t *testing.T) {
		s, _ := subject(subjectRacesafe)
		o := checkOptions(env.Config, s, 1, 10)
		o.Parallel = 2
		rep := runCheck(t, o)
		for _, rule := range racetest.Rules {
			if n := rep.Violations[rule]; n > 0 {
				t.Errorf("racesafe's Client broke %s %d times; first:\n%s", rule, n, rep.Reproducers[rule])
			}
		}
	})
	t.Run("ControllerRuntimeReadYourWrites", func(t *testing.T) {
		s, err := subject(subjectRYW)
		if errors.Is(err, errNoRYW) {
			t.Skip(err)
		}
		runCheck(t, checkOptions(env.Config, s, 1, 3))
	})
}

// runCheck runs o and logs its table and reproducers.
func runCheck(t *testing.T, o racetest.CheckOptions) *racetest.CheckReport {
	t.Helper()
	rep, err := racetest.CheckHistories(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := racetest.WriteCheckTable(&b, []*racetest.CheckReport{rep}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d histories, %d reads, %d refused\n%s", rep.Subject, rep.Histories, rep.Reads, rep.Refused, b.String())
	return rep
}

// TestCheckHistoriesLong is `make check-histories`: HISTORIES histories
// (RACESAFE_CHECK_HISTORIES) per subject of SUBJECTS
// (RACESAFE_CHECK_SUBJECTS, comma-separated, all when empty), a table per
// subject and rule, and a shrunk reproducer per rule broken. With
// RACESAFE_HISTORY=<seed> it runs that one history (RACESAFE_HISTORY_OPS=
// 3,7,9 keeps only those operations) and prints it.
func TestCheckHistoriesLong(t *testing.T) {
	n, one := os.Getenv("RACESAFE_CHECK_HISTORIES"), os.Getenv("RACESAFE_HISTORY")
	if n == "" && one == "" {
		t.Skip("set RACESAFE_CHECK_HISTORIES (make check-histories) or RACESAFE_HISTORY=<seed>")
	}
	histories, seed, shrink := 0, uint64(1), 25
	if n != "" {
		var err error
		if histories, err = strconv.Atoi(n); err != nil {
			t.Fatalf("RACESAFE_CHECK_HISTORIES=%s: %v", n, err)
		}
	}
	var only []int
	if one != "" {
		var err error
		if seed, err = strconv.ParseUint(one, 10, 64); err != nil {
			t.Fatalf("RACESAFE_HISTORY=%s: %v", one, err)
		}
		histories, shrink = 1, 0
		for _, f := range strings.FieldsFunc(os.Getenv("RACESAFE_HISTORY_OPS"), func(r rune) bool { return r == ',' }) {
			i, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("RACESAFE_HISTORY_OPS: %v", err)
			}
			only = append(only, i)
		}
	}
	names := allSubjects
	if s := os.Getenv("RACESAFE_CHECK_SUBJECTS"); s != "" {
		names = strings.Split(s, ",")
	}
	env := testenv.Start(t, testenv.Options{})
	var reports []*racetest.CheckReport
	for _, name := range names {
		s, err := subject(name)
		if errors.Is(err, errNoRYW) {
			t.Logf("skipping subject %s: %v", name, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		o := checkOptions(env.Config, s, seed, histories)
		o.Shrink, o.Only = shrink, only
		if p := os.Getenv("RACESAFE_CHECK_PARALLEL"); p != "" {
			if o.Parallel, err = strconv.Atoi(p); err != nil {
				t.Fatalf("RACESAFE_CHECK_PARALLEL=%s: %v", p, err)
			}
		}
		o.Lag.WatchFaults = watchFaults(t, seed)
		start := time.Now()
		rep, err := racetest.CheckHistories(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		var tb strings.Builder
		if err := racetest.WriteCheckTable(&tb, []*racetest.CheckReport{rep}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d histories in %s\n%s", name, rep.Histories, time.Since(start).Round(time.Second), tb.String())
		reports = append(reports, rep)
		for _, rule := range racetest.Rules {
			if rp, ok := rep.Reproducers[rule]; ok {
				t.Logf("%s breaks %s (RACESAFE_HISTORY=%d RACESAFE_HISTORY_OPS=%s):\n%s", name, rule, rp.Seed, joinInts(rp.Only), rp)
			}
		}
	}
	var b strings.Builder
	if err := racetest.WriteCheckTable(&b, reports); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
}

// watchFaults breaks one watch stream in fifty events of the subject's
// cache, half of the resumptions answered 410 Gone (a relist).
func watchFaults(t *testing.T, seed uint64) *racetest.WatchFaults {
	t.Helper()
	wf, err := racetest.NewWatchFaults(racetest.WatchFaultOptions{Seed: seed, Break: 0.02, Gone: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
