// Command workitem runs the WorkItem controller of the incident.
//
// By default, whatever KUBECONFIG says, it is the demo: it starts an embedded control plane (envtest, with the
// binaries `make envtest` builds), installs the WorkItem CRD, and replays the
// incident: WorkItems are created (each install creating one child ConfigMap
// from a cached List), driven to Failed, and deleted in one burst while the
// controller's informer lags behind the API server; first with the incident's
// naive controller, then with the racesafe one. It prints what each left
// stuck, the children each created twice or left behind and the uninstalls it
// ran twice, all counted on the API server, and exits 0 only when the racesafe
// controller deleted every item and duplicated or left no child.
//
// The demo never reads KUBECONFIG: it writes only to the control plane it
// starts. Only with --cluster does it run the racesafe controller as an
// ordinary manager (metrics, health probes, leader election) against the
// cluster that --kubeconfig, KUBECONFIG or the in-cluster config names, and
// it first prints which cluster that is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/racesafe/racesafe/examples/workitem/config"
	"github.com/racesafe/racesafe/examples/workitem/reconciler"
	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/examples/workitem/settings"
	"github.com/racesafe/racesafe/examples/workitem/sim"
	"github.com/racesafe/racesafe/internal/testenv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	items       int
	lag         time.Duration
	controller  string
	timeout     time.Duration
	concurrency int
	uninstall   time.Duration

	metricsAddr, probeAddr string
	leaderElect            bool
	syncInterval           time.Duration
	cluster                bool
}

func run(args []string, stdout, stderr io.Writer) int {
	var f flags
	fs := flag.NewFlagSet("workitem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.items, "items", 200, "demo: WorkItems to create and delete")
	fs.DurationVar(&f.lag, "lag", 200*time.Millisecond, "demo: how late the controller's informer sees watch events")
	fs.StringVar(&f.controller, "controller", "both", "demo: naive, racesafe or both")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "demo: how long the delete burst may take before items count as stuck")
	fs.IntVar(&f.concurrency, "concurrency", 4, "MaxConcurrentReconciles")
	fs.DurationVar(&f.uninstall, "uninstall", 0, "how long the simulated uninstall takes")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "cluster mode: metrics endpoint address (0 disables)")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "cluster mode: health probe address")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "cluster mode: enable leader election")
	fs.BoolVar(&f.cluster, "cluster", false, "run the controller against a real cluster (--kubeconfig, KUBECONFIG or in-cluster) instead of the demo")
	fs.DurationVar(&f.syncInterval, "sync-status-check-interval", settings.Default.SyncStatusCheckInterval, "requeue interval for unsettled items")
	// controller-runtime registers --kubeconfig on the default FlagSet.
	if kf := flag.CommandLine.Lookup("kubeconfig"); kf != nil {
		fs.Var(kf.Value, kf.Name, kf.Usage)
	}
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if f.cluster {
		ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
		if err := runManager(ctx, f, stderr); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		return 0
	}
	// The demo's own output is the table; controller logs only say errors
	// unless --zap-log-level asks for more.
	levelSet := false
	fs.Visit(func(fl *flag.Flag) { levelSet = levelSet || fl.Name == "zap-log-level" })
	if !levelSet {
		zapOpts.Level = zapcore.ErrorLevel
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(stderr)))
	return runDemo(ctx, f, stdout, stderr)
}

func runManager(ctx context.Context, f flags, stderr io.Writer) error {
	cfgs := &settings.Manager{}
	cfgs.Set(settings.Settings{SyncStatusCheckInterval: f.syncInterval})
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("--cluster: no cluster config: %w", err)
	}
	// Say where the writes go before the first one: a kubeconfig can point
	// anywhere, and this creates and deletes objects.
	fmt.Fprintf(stderr, "cluster mode: writing to %s\n", restCfg.Host)
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scenario.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.probeAddr,
		LeaderElection:         f.leaderElect,
		LeaderElectionID:       "workitem.demo.racesafe.io",
	})
	if err != nil {
		return fmt.Errorf("new manager: %w", err)
	}
	r, err := reconciler.New(mgr, reconciler.Options{
		Installer: sim.New(sim.Options{UninstallDuration: f.uninstall}),
		Interval:  cfgs.SyncStatusCheckInterval,
	})
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr, "workitem", controller.Options{MaxConcurrentReconciles: f.concurrency}); err != nil {
		return fmt.Errorf("set up controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func runDemo(ctx context.Context, f flags, stdout, stderr io.Writer) int {
	var kinds []scenario.Kind
	switch f.controller {
	case "both":
		kinds = []scenario.Kind{scenario.Naive, scenario.Racesafe}
	case "naive":
		kinds = []scenario.Kind{scenario.Naive}
	case "racesafe":
		kinds = []scenario.Kind{scenario.Racesafe}
	default:
		fmt.Fprintf(stderr, "--controller must be naive, racesafe or both, not %q\n", f.controller)
		return 2
	}
	assets, err := testenv.AssetsDir()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	crd, err := config.WorkItemCRD()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	fmt.Fprintf(stderr, "starting an embedded control plane from %s\n", assets)
	env := testenv.NewEnvironment(assets, testenv.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(stderr, "error: start control plane:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(stderr, "warning: stop control plane:", err)
		}
	}()

	var reports []scenario.Report
	for _, k := range kinds {
		fmt.Fprintf(stderr, "%s: creating %d WorkItems, failing them, deleting them in one burst under %s watch lag\n", k, f.items, f.lag)
		rep, err := scenario.Run(ctx, cfg, k, scenario.Options{
			Items:                   f.items,
			Lag:                     f.lag,
			Timeout:                 f.timeout,
			MaxConcurrentReconciles: f.concurrency,
			UninstallDuration:       f.uninstall,
			SyncStatusCheckInterval: f.syncInterval,
			Progress:                stderr,
		})
		if err != nil {
			fmt.Fprintf(stderr, "error: %s run: %v\n", k, err)
			return 1
		}
		reports = append(reports, rep)
	}
	PrintTable(stdout, reports)

	for _, r := range reports {
		if r.Controller != scenario.Racesafe {
			continue
		}
		if r.Stuck > 0 || r.Deleted != r.Items {
			fmt.Fprintf(stderr, "FAIL: the racesafe controller left %d of %d WorkItems stuck\n", r.Stuck, r.Items)
			return 1
		}
		if r.DuplicateChildren > 0 || r.LeftChildren > 0 || r.DuplicateUninstalls > 0 {
			fmt.Fprintf(stderr, "FAIL: the racesafe controller created %d duplicate children, left %d behind, ran %d duplicate uninstalls\n",
				r.DuplicateChildren, r.LeftChildren, r.DuplicateUninstalls)
			return 1
		}
	}
	return 0
}

// PrintTable writes reports as an aligned table.
func PrintTable(w io.Writer, reports []scenario.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "controller\titems\tdeleted\tstuck\tdup-children\tleft-children\tdup-uninstalls\tp50\tp99\tmax\trequests/item\twrites/item\treconciles/item\t")
	for _, r := range reports {
		total := 0
		for _, n := range r.Requests {
			total += n
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t\n",
			r.Controller, r.Items, r.Deleted, r.Stuck, r.DuplicateChildren, r.LeftChildren, r.DuplicateUninstalls,
			round(r.P50), round(r.P99), round(r.Max),
			float64(total)/float64(max(r.Items, 1)), r.WritesPerItem(), float64(r.Reconciles)/float64(max(r.Items, 1)))
	}
	_ = tw.Flush()
	verbs := []string{}
	for _, r := range reports {
		parts := []string{}
		for _, v := range []string{"get", "list", "watch", "patch", "update", "delete"} {
			if n := r.Requests[v]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", v, n))
			}
		}
		verbs = append(verbs, fmt.Sprintf("%s: %s", r.Controller, strings.Join(parts, ", ")))
	}
	fmt.Fprintln(w, "WorkItem requests during the burst:", strings.Join(verbs, "; "))
	verbs = verbs[:0]
	for _, r := range reports {
		parts := []string{}
		for _, v := range []string{"get", "list", "create", "delete"} {
			if n := r.ChildRequests[v]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", v, n))
			}
		}
		verbs = append(verbs, fmt.Sprintf("%s: %s", r.Controller, strings.Join(parts, ", ")))
	}
	fmt.Fprintln(w, "child (ConfigMap) requests during the burst:", strings.Join(verbs, "; "))
}

func round(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}
