package ported_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/racesafe/racesafe/examples/workitem/scenario"
	"github.com/racesafe/racesafe/internal/testenv"
)

// TestPortIsSafeUnderLag: the incident's code, unchanged, behind the
// drop-in port, deletes every item under no lag, 100 ms, 500 ms and
// 1 s ± 500 ms of watch lag, creates each child once, counted on the
// server, and never has a read refused: the client serves its own writes
// where the cache lags them (racesafe_client_reads_total{served="refused"}
// does not move). The same code without the port leaves items stuck and
// duplicates children (TestOwnedChildrenUnderLag).
func TestPortIsSafeUnderLag(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := testenv.Start(t, testenv.Options{CRDDirectoryPaths: []string{"../config/crd"}})
	const items = 24
	for _, cell := range []struct {
		name   string
		lag    time.Duration
		jitter func() time.Duration
	}{
		{"0s", 0, nil},
		{"100ms", 100 * time.Millisecond, nil},
		{"500ms", 500 * time.Millisecond, nil},
		{"1s±500ms", 500 * time.Millisecond, scenario.SeededJitter(5, time.Second)},
	} {
		t.Run(cell.name, func(t *testing.T) {
			refusedBefore := servedReads(t, "refused")
			ownBefore := servedReads(t, "own_write")
			rep, err := scenario.Run(t.Context(), env.Config, scenario.NaiveClient, scenario.Options{
				Items: items, Lag: cell.lag, Jitter: cell.jitter, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			refused, own := servedReads(t, "refused")-refusedBefore, servedReads(t, "own_write")-ownBefore
			t.Logf("naive+client under %s: deleted %d/%d, p50 %s, p99 %s, requests %v, children %d duplicate %d left, %d duplicate uninstalls, reads served from own writes %v, refused %v",
				cell.name, rep.Deleted, rep.Items, rep.P50, rep.P99, rep.Requests, rep.DuplicateChildren, rep.LeftChildren, rep.DuplicateUninstalls, own, refused)
			if rep.Stuck != 0 || rep.Deleted != items {
				t.Errorf("deleted %d of %d, %d stuck; want every item deleted", rep.Deleted, items, rep.Stuck)
			}
			if rep.DuplicateChildren != 0 || rep.LeftChildren != 0 {
				t.Errorf("%d duplicate children, %d left behind; want none", rep.DuplicateChildren, rep.LeftChildren)
			}
			if rep.DuplicateUninstalls != 0 {
				t.Errorf("%d duplicate uninstalls; want none", rep.DuplicateUninstalls)
			}
			if refused != 0 {
				t.Errorf("%v reads refused; want 0: the client serves its own writes", refused)
			}
			if cell.lag >= 500*time.Millisecond && own == 0 {
				t.Errorf("no read was served from an own write under %s lag: the cache never lagged a write, so the cell proves nothing", cell.name)
			}
		})
	}
}

// servedReads sums racesafe_client_reads_total{served=served} over every
// controller.
func servedReads(t *testing.T, served string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range families {
		if mf.GetName() != "racesafe_client_reads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "served" && l.GetValue() == served {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestPortIsAtMostSixLines: the port, as docs/adopting.md shows it, is
// the body of naive.Controller.SetupWithManager with at most 6 changed
// lines, none over 100 characters: the lines of ported.SetupWithManager's body that the naive method
// does not have, the naive lines they replace, and the imports added. The
// signature is left out: the user edits their method in place, where this
// package needs a function.
func TestPortIsAtMostSixLines(t *testing.T) {
	naiveBody, naiveImports := funcLines(t, "../naive/controller.go", "SetupWithManager")
	portBody, portImports := funcLines(t, "ported.go", "SetupWithManager")
	naiveBody, portBody = naiveBody[1:], portBody[1:]
	changed := diffCount(naiveBody, portBody)
	added := 0
	for _, imp := range portImports {
		if !contains(naiveImports, imp) {
			added++
		}
	}
	t.Logf("port: %d changed lines in the functions, %d imports added", changed, added)
	if changed+added > 6 {
		t.Errorf("the port changes %d lines (%d in the functions, %d imports), want at most 6", changed+added, changed, added)
	}
	for _, l := range append(portBody, portImports...) {
		if !contains(naiveBody, l) && len(l) > 100 {
			t.Errorf("a changed line has %d characters, want at most 100: %s", len(l), l)
		}
	}
}

// funcLines returns the trimmed, non-empty, non-comment source lines of the
// named functions (methods included) of file, and its import paths.
func funcLines(t *testing.T, file string, names ...string) (lines, imports []string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		imports = append(imports, imp.Path.Value)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !contains(names, fd.Name.Name) {
			continue
		}
		text := string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset])
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimSpace(l)
			if l != "" && !strings.HasPrefix(l, "//") {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s has none of %v", file, names)
	}
	return lines, imports
}

// diffCount is the number of lines added or removed by a shortest edit from
// a to b (the lines outside their longest common subsequence).
func diffCount(a, b []string) int {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	return len(a) + len(b) - 2*lcs[0][0]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
