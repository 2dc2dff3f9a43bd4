package conflictretry

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/internal/flow"
	"github.com/racesafe/racesafe/vet/internal/report"
)

// Analyzer reports conflict retries that cannot help or repeat side effects.
var Analyzer = &analysis.Analyzer{
	Name:     "conflictretry",
	Doc:      "report RetryOnConflict bodies that retry nothing, re-read from the cache, or have side effects outside the cluster",
	URL:      "https://github.com/racesafe/racesafe/blob/main/docs/vet.md#conflictretry",
	Requires: []*analysis.Analyzer{flow.Analyzer},
	Run:      run,
}

func run(pass *analysis.Pass) (any, error) {
	fl := pass.ResultOf[flow.Analyzer].(*flow.Result)
	for _, f := range pass.Files {
		for _, lit := range fl.RetryBodies(f) {
			check(pass, fl, lit)
		}
	}
	return nil, nil
}

func check(pass *analysis.Pass, fl *flow.Result, lit *ast.FuncLit) {
	var write *ast.CallExpr
	reads := false
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		c := fl.Classify(call)
		switch c.Verb {
		case flow.Get, flow.List:
			reads = true
			v := fl.Root(c.Obj)
			if c.Get() && c.Cached && v != nil && v.Pos() >= lit.Pos() && v.Pos() < lit.End() {
				report.At(pass, call.Pos(), "conflictretry", fmt.Sprintf(
					"the conflict retry re-reads %s from the informer cache: a conflict means the cache is behind the server, so this read usually returns the copy that conflicted; read it through the API reader (mgr.GetAPIReader()) or return the conflict and requeue", v.Name()))
			}
		case flow.Write, flow.Create, flow.Delete:
			if write == nil {
				write = call
			}
		case flow.None:
			if s := fl.Of(fl.Callee(call)); s != nil && len(s.ReGets) > 0 {
				reads = true
			}
			if what := sideEffect(fl.Callee(call)); what != "" {
				report.At(pass, call.Pos(), "conflictretry", fmt.Sprintf(
					"the conflict retry calls %s, which acts outside the cluster: every conflict repeats it; do it once, outside the retry, after the write succeeded", what))
			}
		}
		return true
	})
	if write != nil && !reads {
		report.At(pass, write.Pos(), "conflictretry",
			"the conflict retry writes without reading the object again: on a conflict it sends the same stale object and conflicts again, so it retries nothing; read the object inside the retry (from the API reader), or requeue")
	}
}

// sideEffect names a call that acts outside the cluster, "" otherwise.
func sideEffect(fn *types.Func) string {
	if fn == nil || fn.Pkg() == nil {
		return ""
	}
	switch path := fn.Pkg().Path(); {
	case path == "net/http", path == "os/exec", path == "net", strings.HasPrefix(path, "net/smtp"):
		return path + "." + fn.Name()
	}
	return ""
}
