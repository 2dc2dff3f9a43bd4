package createfromlist

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/internal/flow"
	"github.com/racesafe/racesafe/vet/internal/report"
)

// Analyzer reports creates decided from a cached List.
var Analyzer = flow.NewChecker("createfromlist",
	"report children created with generateName from a cached List, without expectations",
	run)

func run(pass *analysis.Pass, fl *flow.Result) {
	// A package that keeps expectations has the guard this reports the
	// absence of.
	if fl.Expectations {
		return
	}
	for fd := range flow.FuncDecls(pass.Files...) {
		check(pass, fl, fd.Body)
	}
}

func check(pass *analysis.Pass, fl *flow.Result, body *ast.BlockStmt) {
	generated := generateNamed(fl, body)
	listed := map[string]token.Pos{} // kind -> the List
	fl.Walk(body, flow.Visitor{Call: func(n *ast.CallExpr, c flow.Call, _ flow.Written) {
		switch c.Verb {
		case flow.List:
			if c.Cached {
				if k := fl.Kind(c.Obj, true); k != "" {
					if _, ok := listed[k]; !ok {
						listed[k] = n.Pos()
					}
				}
			}
		case flow.Create:
			v := fl.Root(c.Obj)
			if v == nil || !generated[v] || c.Guarded {
				return
			}
			k := fl.Kind(c.Obj, false)
			at, ok := listed[k]
			if !ok {
				return
			}
			report.At(pass, n.Pos(), "createfromlist", fmt.Sprintf(
				"%s is created with generateName after a List of %s from the informer cache (line %d): a cache that has not yet seen this controller's previous Create shows no child, and a second one is created; record the create in racesafe's expectations.OwnerTracker, or write and List through its Client (wire.ControllerManagedBy)",
				v.Name(), k, pass.Fset.Position(at).Line))
		case flow.None:
			s := fl.Of(fl.Callee(n))
			if s == nil {
				return
			}
			for k := range s.Lists {
				if _, ok := listed[k]; !ok {
					listed[k] = n.Pos()
				}
			}
		}
	}})
}

// generateNamed returns the variables given a generateName in body: in a
// composite literal (ObjectMeta{GenerateName: ...}), by assignment to
// .GenerateName, or by SetGenerateName.
func generateNamed(fl *flow.Result, body *ast.BlockStmt) map[*types.Var]bool {
	out := map[*types.Var]bool{}
	hasGenerateName := func(e ast.Expr) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "GenerateName" {
					found = true
				}
			}
			return !found
		})
		return found
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if i < len(n.Lhs) && hasGenerateName(rhs) {
					if v := fl.Root(n.Lhs[i]); v != nil {
						out[v] = true
					}
				}
				if sel, ok := n.Lhs[min(i, len(n.Lhs)-1)].(*ast.SelectorExpr); ok && sel.Sel.Name == "GenerateName" {
					if v := fl.RootOf(sel.X); v != nil {
						out[v] = true
					}
				}
			}
		case *ast.ValueSpec:
			for i, val := range n.Values {
				if i < len(n.Names) && hasGenerateName(val) {
					if v, ok := fl.Info().ObjectOf(n.Names[i]).(*types.Var); ok {
						out[v] = true
					}
				}
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "SetGenerateName" {
				if v := fl.RootOf(sel.X); v != nil {
					out[v] = true
				}
			}
		}
		return true
	})
	return out
}
