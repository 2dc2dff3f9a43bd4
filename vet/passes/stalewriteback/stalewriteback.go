package stalewriteback

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/internal/flow"
	"github.com/racesafe/racesafe/vet/internal/report"
)

// Analyzer reports stale write-backs.
var Analyzer = flow.NewChecker("stalewriteback",
	"report finalizer removals merged from a cached copy without optimistic locking, and statuses copied from before a conflict retry",
	run)

func run(pass *analysis.Pass, fl *flow.Result) {
	for _, f := range pass.Files {
		for fd := range flow.FuncDecls(f) {
			finalizers(pass, fl, fd.Body)
		}
		for _, lit := range fl.RetryBodies(f) {
			statusCopies(pass, fl, lit)
		}
	}
}

// finalizers follows each variable from a cached Get: a RemoveFinalizer on
// it, then a merge patch without optimistic lock (or an Update after its
// resourceVersion was cleared), before any write refreshed it, is reported.
func finalizers(pass *analysis.Pass, fl *flow.Result, body *ast.BlockStmt) {
	cached := map[*types.Var]token.Pos{}  // read from the cache, not written since
	removed := map[*types.Var]token.Pos{} // finalizer removed from that copy
	cleared := map[*types.Var]bool{}      // resourceVersion set to ""
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "ResourceVersion" && i < len(n.Rhs) && isEmptyString(n.Rhs[i]) {
					if v := fl.RootOf(sel.X); v != nil {
						cleared[v] = true
					}
				}
			}
		case *ast.CallExpr:
			c := fl.Classify(n)
			v := fl.Root(c.Obj)
			switch c.Verb {
			case flow.Get:
				if v != nil && c.Cached {
					cached[v] = n.Pos()
					delete(removed, v)
					delete(cleared, v)
				} else if v != nil {
					delete(cached, v)
				}
				return true
			case flow.Write:
				if v == nil {
					return true
				}
				if at, ok := removed[v]; ok {
					if (c.Method == "Patch" && mergeWithoutLock(fl, n)) || (c.Method == "Update" && cleared[v]) {
						report.At(pass, n.Pos(), "stalewriteback", fmt.Sprintf(
							"the finalizer removed at line %d is written from a copy of %s read from the informer cache (line %d) without optimistic locking: a merge patch replaces the whole finalizers list, so a finalizer added since that read is removed too; use client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}) or read the object through the API reader",
							pass.Fset.Position(at).Line, v.Name(), pass.Fset.Position(cached[v]).Line))
					}
				}
				delete(cached, v)
				delete(removed, v)
				return true
			}
			fn := fl.Callee(n)
			if fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == flow.UtilPkg && fn.Name() == "RemoveFinalizer" && len(n.Args) > 0 {
				if v := fl.Root(n.Args[0]); v != nil {
					if _, ok := cached[v]; ok {
						removed[v] = n.Pos()
					}
				}
			}
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "SetResourceVersion" && len(n.Args) == 1 && isEmptyString(n.Args[0]) {
				if v := fl.RootOf(sel.X); v != nil {
					cleared[v] = true
				}
			}
		}
		return true
	})
}

// mergeWithoutLock reports whether a Patch call's patch is client.MergeFrom
// (or MergeFromWithOptions without MergeFromWithOptimisticLock).
func mergeWithoutLock(fl *flow.Result, call *ast.CallExpr) bool {
	if len(call.Args) < 3 {
		return false
	}
	pc, ok := ast.Unparen(call.Args[2]).(*ast.CallExpr)
	if !ok {
		return false
	}
	fn := fl.Callee(pc)
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != flow.ClientPkg {
		return false
	}
	switch fn.Name() {
	case "MergeFrom":
		return true
	case "MergeFromWithOptions":
		for _, a := range pc.Args[1:] {
			if cl, ok := ast.Unparen(a).(*ast.CompositeLit); ok {
				if t, ok := types.Unalias(fl.Info().TypeOf(cl)).(*types.Named); ok && t.Obj().Name() == "MergeFromWithOptimisticLock" {
					return false
				}
			}
		}
		return true
	}
	return false
}

// statusCopies reports x.Status = y.Status inside a conflict retry when y
// was read before the retry began.
func statusCopies(pass *analysis.Pass, fl *flow.Result, lit *ast.FuncLit) {
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, lhs := range as.Lhs {
			l, ok := lhs.(*ast.SelectorExpr)
			r, ok2 := ast.Unparen(as.Rhs[i]).(*ast.SelectorExpr)
			if !ok || !ok2 || l.Sel.Name != "Status" || r.Sel.Name != "Status" {
				continue
			}
			src := fl.RootOf(r.X)
			if src == nil || (src.Pos() >= lit.Pos() && src.Pos() < lit.End()) {
				continue
			}
			report.At(pass, as.Pos(), "stalewriteback", fmt.Sprintf(
				"the conflict retry copies the status of %s, read before the retry began: after a conflict the write succeeds with that old status; compute the status inside the retry from the object it re-read",
				src.Name()))
		}
		return true
	})
}

func isEmptyString(e ast.Expr) bool {
	lit, ok := ast.Unparen(e).(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && (lit.Value == `""` || lit.Value == "``")
}
