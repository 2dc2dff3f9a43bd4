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
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
	timeout := flag.Duration("timeout", 30*time.Second, "how long a burst may take before items count as stuck")
	concurrency := flag.Int("concurrency", 4, "MaxConcurrentReconciles, the same for every controller")
	uninstall := flag.Duration("uninstall", 0, "simulated uninstall time")
	out := flag.String("out", "out", "folder for bench-e2e.csv and bench-e2e.md")
	soak := flag.Bool("soak", false, "run the racesafe soak instead of the burst matrix")
	soakFor := flag.Duration("soak-duration", 5*time.Minute, "soak: how long new items keep coming")
	restartEvery := flag.Duration("soak-restart-every", time.Minute, "soak: manager restart period")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel), zap.WriteTo(os.Stderr)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfgEnv, err := startControlPlane()
	if err != nil {
		fail(err)
	}
	// fail exits without running defers: stop the control plane first, so no
	// kube-apiserver or etcd outlives the program.
	stopPlane = func() { _ = cfgEnv.Stop() }
	defer stopPlane()
	cfg := cfgEnv.Config

	fmt.Printf("machine: %d cores, %s, GOMAXPROCS %d\n\n", runtime.NumCPU(), runtime.Version(), runtime.GOMAXPROCS(0))
	if *soak {
		rng := rand.New(rand.NewPCG(1, 2))
		rep, err := scenario.Soak(ctx, cfg, scenario.SoakOptions{
			Duration:     *soakFor,
			RestartEvery: *restartEvery,
			Concurrency:  *concurrency,
			Seed:         42,
			Jitter:       func() time.Duration { return time.Duration(rng.Int64N(int64(100 * time.Millisecond))) },
			Progress:     os.Stderr,
		})
		if err != nil {
			fail(err)
		}
		fmt.Printf("| created | gone | stuck | finalizers left | duplicate children | children left | duplicate uninstalls | restarts | injected conflicts | injected 500s | goroutines before | after |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		fmt.Printf("| %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", rep.Created, rep.Gone, rep.Stuck, rep.FinalizersLeft,
			rep.DuplicateChildren, rep.LeftChildren, rep.DuplicateUninstalls, rep.Restarts, rep.Injected.Of(racetest.FaultConflict), rep.Injected.Of(racetest.FaultServerError), rep.GoroutinesBefore, rep.GoroutinesAfter)
		// Duplicate uninstalls are reported, not failed: under injected 500s
		// and restarts a release that did not happen re-runs the delete flow,
		// whose uninstall is idempotent.
		if rep.Stuck > 0 || rep.FinalizersLeft > 0 || rep.DuplicateChildren > 0 || rep.LeftChildren > 0 {
			fail(fmt.Errorf("soak left %d items stuck, %d finalizers, %d children behind; created %d duplicate children",
				rep.Stuck, rep.FinalizersLeft, rep.LeftChildren, rep.DuplicateChildren))
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
	var reps []scenario.Report
	for _, n := range splitInts(*items) {
		for _, lag := range splitDurations(*lags) {
			for _, k := range ks {
				fmt.Fprintf(os.Stderr, "%s: %d items, lag %s\n", k, n, lag)
				rep, err := scenario.Run(ctx, cfg, k, scenario.Options{
					Items: n, Lag: lag, Timeout: *timeout, MaxConcurrentReconciles: *concurrency,
					UninstallDuration: *uninstall, Progress: os.Stderr,
				})
				if err != nil {
					// A controller that cannot finish a phase of the run is a
					// finding, not a reason to drop the rest of the matrix.
					fmt.Fprintf(os.Stderr, "%s: %d items, lag %s: %v\n", k, n, lag, err)
					rep.Error = err.Error()
				}
				reps = append(reps, rep)
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
	writeMarkdown(io.MultiWriter(os.Stdout, md), reps)
	f, err := os.Create(filepath.Join(*out, "bench-e2e.csv"))
	if err != nil {
		fail(err)
	}
	defer f.Close()
	if err := writeCSV(f, reps); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s and %s\n", md.Name(), f.Name())
}

var verbs = []string{"get", "list", "watch", "patch", "update"}

func writeMarkdown(w io.Writer, reps []scenario.Report) {
	fmt.Fprintln(w, "| controller | items | lag | stuck | dup children | children left | dup uninstalls | p50 | p99 | max | items/s | get/item | patch/item | update/item | reconciles/item |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range reps {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %d | %s | run failed: %s ||||||||||||\n", r.Controller, r.Items, r.Lag, r.Error)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %d | %d | %d | %d | %s | %s | %s | %.1f | %.2f | %.2f | %.2f | %.2f |\n",
			r.Controller, r.Items, r.Lag, r.Stuck, r.DuplicateChildren, r.LeftChildren, r.DuplicateUninstalls, ms(r.P50), ms(r.P99), ms(r.Max), r.Throughput(),
			r.RequestsPerItem("get"), r.RequestsPerItem("patch"), r.RequestsPerItem("update"),
			float64(r.Reconciles)/float64(max(r.Items, 1)))
	}
}

func writeCSV(w io.Writer, reps []scenario.Report) error {
	cw := csv.NewWriter(w)
	head := []string{"controller", "items", "lag_ms", "deleted", "stuck", "duplicate_children", "left_children", "duplicate_uninstalls", "p50_ms", "p99_ms", "max_ms", "items_per_s", "reconciles"}
	for _, v := range verbs {
		head = append(head, v+"_requests")
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range reps {
		row := []string{string(r.Controller), strconv.Itoa(r.Items), strconv.FormatInt(r.Lag.Milliseconds(), 10),
			strconv.Itoa(r.Deleted), strconv.Itoa(r.Stuck), strconv.Itoa(r.DuplicateChildren), strconv.Itoa(r.LeftChildren),
			strconv.Itoa(r.DuplicateUninstalls), strconv.FormatInt(r.P50.Milliseconds(), 10),
			strconv.FormatInt(r.P99.Milliseconds(), 10), strconv.FormatInt(r.Max.Milliseconds(), 10),
			strconv.FormatFloat(r.Throughput(), 'f', 2, 64), strconv.Itoa(r.Reconciles)}
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

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

type envtestEnv struct {
	*envtest.Environment
	Config *rest.Config
}

func startControlPlane() (*envtestEnv, error) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		return nil, err
	}
	crd, err := config.WorkItemCRD()
	if err != nil {
		return nil, err
	}
	env := testenv.NewEnvironment(assets, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	return &envtestEnv{Environment: env, Config: cfg}, nil
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
