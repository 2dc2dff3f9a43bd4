package conflictretry

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/internal/flow"
	"github.com/racesafe/racesafe/vet/internal/report"
)

// Analyzer reports conflict retries that cannot help or repeat side effects.
var Analyzer = flow.NewChecker("conflictretry",
	"report RetryOnConflict bodies that retry nothing, re-read from the cache, or have side effects outside the cluster",
	run)

func run(pass *analysis.Pass, fl *flow.Result) {
	for _, f := range pass.Files {
		lits := fl.RetryBodies(f)
		for _, lit := range lits {
			check(pass, fl, lit)
		}
		if len(lits) == 0 {
			continue
		}
		for fd := range flow.FuncDecls(f) {
			checkCachedReads(pass, fl, fd.Body, lits)
		}
	}
}

// checkCachedReads reports a retry's cached re-read into a variable of its
// own when the function wrote that object (its key names a written
// variable) or an object of its kind earlier on the path: the cache cannot
// show the function's own write before its informer does, so every attempt
// reads the copy that conflicted. A cached re-read after another writer's
// change usually helps (the informer delivers it within the backoff) and is
// not reported; a re-read into the enclosing function's variable is
// regetwritten's.
func checkCachedReads(pass *analysis.Pass, fl *flow.Result, body *ast.BlockStmt, lits []*ast.FuncLit) {
	in := func(pos token.Pos) *ast.FuncLit {
		for _, lit := range lits {
			if lit.Pos() <= pos && pos < lit.End() {
				return lit
			}
		}
		return nil
	}
	line := func(p token.Pos) int { return pass.Fset.Position(p).Line }
	fl.Walk(body, flow.Visitor{Call: func(n *ast.CallExpr, c flow.Call, written flow.Written) {
		if !c.Get() || !c.Cached || len(n.Args) < 2 {
			return
		}
		lit := in(n.Pos())
		v := fl.Root(c.Obj)
		if lit == nil || v == nil || v.Pos() < lit.Pos() || v.Pos() >= lit.End() {
			return
		}
		var by *types.Var
		ast.Inspect(n.Args[1], func(k ast.Node) bool {
			if id, ok := k.(*ast.Ident); ok && by == nil {
				if kv := fl.Root(id); kv != nil {
					if _, ok := written[kv]; ok {
						by = kv
					}
				}
			}
			return by == nil
		})
		if kind := fl.Kind(c.Obj, false); by == nil && kind != "" {
			for w := range written {
				if flow.KindOf(w.Type(), false) == kind && (by == nil || written[w] > written[by]) {
					by = w
				}
			}
		}
		if by == nil {
			return
		}
		report.At(pass, n.Pos(), "conflictretry", fmt.Sprintf(
			"the conflict retry re-reads %s from the informer cache after this function wrote %s at line %d: the cache cannot show that write before its informer does, so each attempt reads the copy that conflicted and conflicts again; read it through the API reader (mgr.GetAPIReader()), or keep the object the write returned (statusupdate.Patcher)",
			v.Name(), by.Name(), line(written[by])))
	}})
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
		case flow.Write, flow.Create, flow.Delete:
			// An object declared in the body (job, err := getJob(...))
			// is obtained again on every attempt, by whatever call
			// returned it; one from outside is the same each time.
			if v := fl.Root(c.Obj); write == nil && v != nil && (v.Pos() < lit.Pos() || v.Pos() >= lit.End()) {
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
