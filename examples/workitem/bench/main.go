// Command bench drives the same delete burst through every controller the
// scenario knows (the incident's, its two hand fixes, the incident's on
// controller-runtime's read-your-writes client, racesafe, and the incident's
// behind racesafe's drop-in port) on one embedded control plane in one run,
// and prints a Markdown table and a CSV file: items stuck beside children
// created twice or left behind and uninstalls run twice.
// With --soak it runs the racesafe soak instead.
package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"go.uber.org/zap/zapcore"

	"github.com/racesafe/racesafe/examples/workitem/config"
	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
	"github.com/racesafe/racesafe/racetest"
)

func main() {
	items := flag.String("items", "100,1000", "comma-separated item counts")
	lags := flag.String("lags", "0,100ms,500ms", "comma-separated watch lags")
	kinds := flag.String("controllers", "all", "comma-separated controllers, or all")
	timeout := flag.Duration("timeout", 30*time.Second, "burst deadline: how long after the first delete items count as stuck")
	setupTimeout := flag.Duration("setup-timeout", 0, "limit for the create flow; 0: computed per cell from items and lag (scenario.SetupDeadline)")
	calItems := flag.Int("calibrate-items", 1000, "items each capacity calibration pass writes; 0: no calibration")
	cpuProfile := flag.String("cpu-profile", "", "file for a pprof CPU profile of the whole run (the controllers and the harness, not the control plane)")
	rounds := flag.Int("rounds", 1, "runs of each cell; an odd round runs the cell's controllers in reverse order, and every second round starts one controller later")
	concurrency := flag.Int("concurrency", 4, "MaxConcurrentReconciles, the same for every controller")
	uninstall := flag.Duration("uninstall", 0, "simulated uninstall time")
	out := flag.String("out", "out", "folder for bench-e2e.csv and bench-e2e.md")
	soak := flag.Bool("soak", false, "run the racesafe soak instead of the burst matrix")
	soakFor := flag.Duration("soak-duration", 5*time.Minute, "soak: how long new items keep coming")
	restartEvery := flag.Duration("soak-restart-every", time.Minute, "soak: leader failover period (alternately a crash and a clean handover)")
	apiRestartEvery := flag.Duration("soak-apiserver-restart-every", 2*time.Minute, "soak: kube-apiserver restart period; 0: none")
	goroutines := flag.String("soak-goroutines", "", "soak: file for a dump of every goroutine's stack if a wave does not move")
	heapProfile := flag.String("soak-heap-profile", "", "soak: file for a pprof heap profile written at the end, after a GC (go tool pprof -sample_index=inuse_space)")
	flag.Parse()
	if *heapProfile != "" {
		// The default rate samples one allocation per 512 KiB: a few
		// samples for a heap of a few MiB, too coarse to name its owners.
		runtime.MemProfileRate = 4096
	}
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel), zap.WriteTo(os.Stderr)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	plane, err := startControlPlane(*soak)
	if err != nil {
		fail(err)
	}
	// fail exits without running defers: stop the control plane first, so no
	// kube-apiserver or etcd outlives the program.
	stopPlane = func() { _ = plane.stop() }
	defer stopPlane()
	cfg := plane.cfg

	fmt.Printf("machine: %d cores, %s, GOMAXPROCS %d\n\n", runtime.NumCPU(), runtime.Version(), runtime.GOMAXPROCS(0))
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if *soak {
		// An io.Writer holding a nil *os.File would not be nil: keep both.
		var heap *os.File
		var heapW io.Writer
		if *heapProfile != "" {
			if heap, err = os.Create(*heapProfile); err != nil {
				fail(fmt.Errorf("heap profile: %w", err))
			}
			heapW = heap
		}
		rep, err := scenario.Soak(ctx, cfg, scenario.SoakOptions{
			Duration:              *soakFor,
			RestartEvery:          *restartEvery,
			APIServerRestartEvery: *apiRestartEvery,
			Restarter:             plane.restarter,
			Concurrency:           *concurrency,
			Seed:                  42,
			Jitter:                scenario.SeededJitter(1, 100*time.Millisecond),
			Progress:              os.Stderr,
			Describe:              os.Stderr,
			Goroutines:            dumpFile(*goroutines),
			HeapProfile:           heapW,
		})
		if heap != nil {
			if cerr := heap.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("close heap profile: %w", cerr)
			}
		}
		if err != nil {
			fail(err)
		}
		writeSoak(os.Stdout, *soakFor, rep)
		if unexplained := rep.DuplicateUninstalls - rep.DuplicateUninstallsAfterExit; rep.Stuck > 0 || rep.FinalizersLeft > 0 ||
			rep.DuplicateChildren > 0 || rep.LeftChildren > 0 || unexplained > 0 {
			fail(fmt.Errorf("soak left %d items stuck, %d finalizers, %d children behind; %d duplicate children, %d duplicate uninstalls not after an exit",
				rep.Stuck, rep.FinalizersLeft, rep.LeftChildren, rep.DuplicateChildren, unexplained))
		}
		return
	}

	var ks []scenario.Kind
	if *kinds == "all" {
		ks = scenario.Kinds
	} else {
		for _, k := range strings.Split(*kinds, ",") {
			ks = append(ks, scenario.Kind(strings.TrimSpace(k)))
		}
	}
	var capacity scenario.Capacity
	if *calItems > 0 {
		fmt.Fprintf(os.Stderr, "calibrating: %d writers, %d items\n", *concurrency, *calItems)
		if capacity, err = scenario.Calibrate(ctx, cfg, scenario.CalibrateOptions{Writers: *concurrency, Items: *calItems}); err != nil {
			fail(fmt.Errorf("calibrate: %w", err))
		}
		writeCapacity(os.Stdout, capacity)
	}
	if *rounds < 1 {
		fail(fmt.Errorf("--rounds %d: want at least 1", *rounds))
	}
	var runs []roundRun
	for round := range *rounds {
		for _, n := range splitInts(*items) {
			for _, lag := range splitDurations(*lags) {
				for _, k := range order(ks, round) {
					fmt.Fprintf(os.Stderr, "round %d: %s: %d items, lag %s\n", round+1, k, n, lag)
					rep, err := scenario.Run(ctx, cfg, k, scenario.Options{
						Items: n, Lag: lag, Timeout: *timeout, SetupTimeout: *setupTimeout, MaxConcurrentReconciles: *concurrency,
						UninstallDuration: *uninstall, Progress: os.Stderr,
					})
					if err != nil {
						// A controller that cannot finish a phase of the run is a
						// finding, not a reason to drop the rest of the matrix.
						fmt.Fprintf(os.Stderr, "%s: %d items, lag %s: %v\n", k, n, lag, err)
						rep.Error = err.Error()
					}
					runs = append(runs, roundRun{round: round, rep: rep})
				}
			}
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	md, err := os.Create(filepath.Join(*out, "bench-e2e.md"))
	if err != nil {
		fail(err)
	}
	defer md.Close()
	mw := io.MultiWriter(os.Stdout, md)
	if *calItems > 0 {
		writeCapacity(md, capacity)
	}
	fmt.Fprintf(mw, "burst deadline %s; setup deadline %s\n\n", *timeout, setupNote(*setupTimeout))
	reps := make([]scenario.Report, len(runs))
	for i, run := range runs {
		reps[i] = run.rep
	}
	writeMarkdown(mw, reps, capacity)
	fmt.Fprintln(mw)
	writeGoals(mw, reps, capacity, 1000, 500*time.Millisecond)
	if *rounds > 1 {
		fmt.Fprintln(mw)
		writeRounds(mw, runs, *rounds)
	}
	f, err := os.Create(filepath.Join(*out, "bench-e2e.csv"))
	if err != nil {
		fail(err)
	}
	defer f.Close()
	if err := writeCSV(f, runs, capacity); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s and %s\n", md.Name(), f.Name())
}

var verbs = []string{"get", "list", "watch", "patch", "update"}

// minWrites is the fewest WorkItem writes the delete flow can make per item:
// Deleting (with the DryRun condition) through the status subresource before
// the uninstall starts, then the finalizer through the object, which a
// status write cannot change.
const minWrites = 2

func writeCapacity(w io.Writer, c scenario.Capacity) {
	fmt.Fprintf(w, "capacity, %d writers, no client-side rate limit, %d pre-created WorkItems each:\n", c.Writers, c.Items)
	fmt.Fprintf(w, "- status merge patches: %.0f writes/s (%d in %s)\n", c.Status, c.Items, c.StatusElapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "- finalizer releases of deleting items: %.0f writes/s (%d in %s)\n", c.Release, c.Items, c.ReleaseElapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "- a %d-write delete flow (one of each) at that capacity: %.1f items/s\n\n", minWrites, c.MinimalFlowItems())
}

func setupNote(d time.Duration) string {
	if d > 0 {
		return d.String()
	}
	return "per cell, column setup (scenario.SetupDeadline)"
}

func writeMarkdown(w io.Writer, reps []scenario.Report, c scenario.Capacity) {
	fmt.Fprintln(w, "| controller | items | lag | setup (deadline) | stuck | last gone | dup children | children left | dup uninstalls | p50 | p99 | max | items/s |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range reps {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %d | %s | - (%s) | run failed: %s |||||||||\n", r.Controller, r.Items, r.Lag, secs(r.SetupDeadline), r.Error)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s (%s) | %d | %s | %d | %d | %d | %s | %s | %s | %.1f |\n",
			r.Controller, r.Items, r.Lag, secs(r.Setup), secs(r.SetupDeadline), r.Stuck, secs(r.LastGone),
			r.DuplicateChildren, r.LeftChildren, r.DuplicateUninstalls, ms(r.P50), ms(r.P99), ms(r.Max), r.Throughput())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| controller | items | lag | writes/item | writes/s | of capacity | child requests/item | round trips/item | mean round trip | worker time/item | workers busy | reconciles/item | waited reads (p50, max), in stalls | process stalls (longest) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range reps {
		if r.Error != "" {
			continue
		}
		n := float64(max(r.Items, 1))
		child := 0
		for _, v := range r.ChildRequests {
			child += v
		}
		waited := "0"
		if r.Waited > 0 {
			waited = fmt.Sprintf("%d of %d (%s, %s), %d", r.Waited, r.Reads, ms(r.WaitP50), ms(r.WaitMax), r.WaitedInStalls)
		}
		stalls := "0"
		if r.Stalls > 0 {
			stalls = fmt.Sprintf("%d (%s)", r.Stalls, ms(r.StallMax))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.2f | %.0f | %.0f%% | %.2f | %.2f | %.1fms | %.1fms | %.0f%% | %.2f | %s | %s |\n",
			r.Controller, r.Items, r.Lag, float64(r.Writes())/n, r.WritesPerSecond(),
			100*c.Fraction(r.StatusWrites, r.ObjectWrites, r.Elapsed), float64(child)/n,
			float64(r.RoundTrips)/n, float64(r.MeanRoundTrip().Microseconds())/1000,
			float64(r.ReconcileTime.Microseconds())/1000/n, 100*r.WorkersBusy(),
			float64(r.Reconciles)/n, waited, stalls)
	}
}

// writeGoals checks issue 13's goals for one cell against the same run.
func writeGoals(w io.Writer, reps []scenario.Report, c scenario.Capacity, items int, lag time.Duration) {
	cell := map[scenario.Kind]scenario.Report{}
	for _, r := range reps {
		if r.Items == items && r.Lag == lag {
			cell[r.Controller] = r
		}
	}
	rs, ok := cell[scenario.Racesafe]
	if !ok {
		return
	}
	fmt.Fprintf(w, "goals, %d items, lag %s:\n", items, lag)
	if rs.Error != "" {
		fmt.Fprintf(w, "- racesafe did not finish: %s\n", rs.Error)
		return
	}
	fmt.Fprintf(w, "- racesafe stuck: %d (goal 0)\n", rs.Stuck)
	for _, g := range []struct {
		k    scenario.Kind
		want float64
	}{{scenario.NaiveFix2, 1.4}, {scenario.NaiveRYW, 5}} {
		o, ok := cell[g.k]
		switch {
		case !ok:
		case o.Error != "":
			fmt.Fprintf(w, "- items/s against %s: no ratio, %s did not finish: %s\n", g.k, g.k, o.Error)
		case o.Throughput() == 0:
			fmt.Fprintf(w, "- items/s against %s: no ratio, %s deleted nothing\n", g.k, g.k)
		default:
			fmt.Fprintf(w, "- items/s against %s: %.1f / %.1f = %.2fx (goal at least %.1fx)\n",
				g.k, rs.Throughput(), o.Throughput(), rs.Throughput()/o.Throughput(), g.want)
		}
	}
	fmt.Fprintf(w, "- racesafe writes/item: %.2f (minimum %d)\n", float64(rs.Writes())/float64(max(rs.Items, 1)), minWrites)
	fmt.Fprintf(w, "- racesafe writes/s: %.0f, %.0f%% of the calibrated capacity for its mix; %.1f items/s against %.1f items/s for a %d-write flow at capacity\n",
		rs.WritesPerSecond(), 100*c.Fraction(rs.StatusWrites, rs.ObjectWrites, rs.Elapsed), rs.Throughput(), c.MinimalFlowItems(), minWrites)
}

func writeCSV(w io.Writer, runs []roundRun, c scenario.Capacity) error {
	cw := csv.NewWriter(w)
	head := []string{"round", "controller", "items", "lag_ms", "error", "setup_ms", "setup_deadline_ms", "burst_deadline_ms", "deleted", "stuck", "last_gone_ms",
		"duplicate_children", "left_children", "duplicate_uninstalls", "p50_ms", "p99_ms", "max_ms", "items_per_s", "reconciles",
		"status_writes", "object_writes", "writes_per_s", "capacity_fraction", "reads", "waited_reads", "wait_p50_ms", "wait_max_ms",
		"round_trips", "round_trip_ms", "reconcile_ms", "workers_busy", "waited_reads_in_stalls", "stalls", "stall_max_ms"}
	for _, v := range verbs {
		head = append(head, v+"_requests")
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	msf := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	for _, run := range runs {
		r := run.rep
		row := []string{strconv.Itoa(run.round + 1), string(r.Controller), strconv.Itoa(r.Items), msf(r.Lag), r.Error, msf(r.Setup), msf(r.SetupDeadline), msf(r.BurstDeadline),
			strconv.Itoa(r.Deleted), strconv.Itoa(r.Stuck), msf(r.LastGone), strconv.Itoa(r.DuplicateChildren), strconv.Itoa(r.LeftChildren),
			strconv.Itoa(r.DuplicateUninstalls), msf(r.P50), msf(r.P99), msf(r.Max),
			strconv.FormatFloat(r.Throughput(), 'f', 2, 64), strconv.Itoa(r.Reconciles),
			strconv.Itoa(r.StatusWrites), strconv.Itoa(r.ObjectWrites), strconv.FormatFloat(r.WritesPerSecond(), 'f', 1, 64),
			strconv.FormatFloat(c.Fraction(r.StatusWrites, r.ObjectWrites, r.Elapsed), 'f', 3, 64),
			strconv.Itoa(r.Reads), strconv.Itoa(r.Waited), msf(r.WaitP50), msf(r.WaitMax),
			strconv.Itoa(r.RoundTrips), msf(r.RoundTripTime), msf(r.ReconcileTime), strconv.FormatFloat(r.WorkersBusy(), 'f', 3, 64),
			strconv.Itoa(r.WaitedInStalls), strconv.Itoa(r.Stalls), msf(r.StallMax)}
		for _, v := range verbs {
			row = append(row, strconv.Itoa(r.Requests[v]))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// controlPlane is the embedded envtest control plane of a run.
type controlPlane struct {
	cfg *rest.Config
	// restarter restarts its kube-apiserver; nil unless restartable.
	restarter *racetest.APIServerRestarter
	stop      func() error
}

// startControlPlane starts envtest; restartable keeps the API server's
// certificates in a folder of its own, so a restarted kube-apiserver is
// the same server to the clients, and stops it after 1s
// (racetest.NewAPIServerRestarter).
func startControlPlane(restartable bool) (*controlPlane, error) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	crd, err := config.WorkItemCRD()
	if err != nil {
		return nil, err
	}
	env := testenv.NewEnvironment(assets, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	plane := &controlPlane{stop: env.Stop}
	if restartable {
		dir, err := os.MkdirTemp("", "racesafe-soak-certs-")
		if err != nil {
			return nil, err
		}
		if plane.restarter, err = racetest.NewAPIServerRestarter(env, racetest.APIServerRestartOptions{CertDir: dir}); err != nil {
			return nil, err
		}
		plane.stop = func() error {
			defer os.RemoveAll(dir)
			return plane.restarter.Stop()
		}
	}
	if plane.cfg, err = env.Start(); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	return plane, nil
}

func writeSoak(w io.Writer, d time.Duration, rep scenario.SoakReport) {
	fmt.Fprintf(w, "soak: %s of new items, %s in all\n\n", d, rep.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "| created | gone | stuck | finalizers left | duplicate children | children left | duplicate uninstalls | of them after a replica exited |\n|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d | %d | %d |\n\n", rep.Created, rep.Gone, rep.Stuck, rep.FinalizersLeft,
		rep.DuplicateChildren, rep.LeftChildren, rep.DuplicateUninstalls, rep.DuplicateUninstallsAfterExit)
	sum := func(m map[string]int) int {
		n := 0
		for _, v := range m {
			n += v
		}
		return n
	}
	relists := 0
	for _, v := range rep.Watch.Lists {
		relists += v
	}
	fmt.Fprintf(w, "| fault | injected |\n|---|---|\n")
	for _, f := range []racetest.Fault{racetest.FaultConflict, racetest.FaultServerError, racetest.FaultAppliedServerError, racetest.FaultAppliedTimeout} {
		fmt.Fprintf(w, "| %s | %d |\n", f, rep.Injected.Of(f))
	}
	fmt.Fprintf(w, "| watch stream broken | %d |\n| watch answered 410 Gone | %d |\n| lists (syncs and relists) | %d |\n", sum(rep.Watch.Broken), sum(rep.Watch.Gone), relists)
	fmt.Fprintf(w, "| leader crashed (lease left to expire) | %d |\n| leader handed over | %d |\n| replica exited by itself (replaced) | %d |\n| kube-apiserver restarted | %d |\n\n",
		rep.Crashes, rep.Handovers, rep.Exits, rep.APIServerRestarts)
	fmt.Fprintf(w, "| | before | after |\n|---|---|---|\n| goroutines | %d | %d |\n| live heap | %.1f MiB | %.1f MiB |\n",
		rep.GoroutinesBefore, rep.GoroutinesAfter, float64(rep.HeapBefore)/(1<<20), float64(rep.HeapAfter)/(1<<20))
	fmt.Fprintf(w, "\nslowest wave, created to Failed: %s\n", rep.SlowestWave.Round(100*time.Millisecond))
}

func splitInts(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			fail(fmt.Errorf("--items: %w", err))
		}
		out = append(out, n)
	}
	return out
}

func splitDurations(s string) []time.Duration {
	var out []time.Duration
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "0" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(p)
		if err != nil {
			fail(fmt.Errorf("--lags: %w", err))
		}
		out = append(out, d)
	}
	return out
}

var stopPlane = func() {}

func fail(err error) {
	stopPlane()
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

// dumpFile opens path for a goroutine dump, or returns nil for none.
func dumpFile(path string) io.Writer {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	return f
}
