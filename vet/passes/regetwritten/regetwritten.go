package regetwritten

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/internal/flow"
	"github.com/racesafe/racesafe/vet/internal/report"
)

// Analyzer reports cached re-reads into written objects.
var Analyzer = &analysis.Analyzer{
	Name:     "regetwritten",
	Doc:      "report cached Gets into an object this reconcile wrote (the incident's stale re-read)",
	URL:      "https://github.com/racesafe/racesafe/blob/main/docs/vet.md#regetwritten",
	Requires: []*analysis.Analyzer{flow.Analyzer},
	Run:      run,
}

const fix = "read into a fresh variable, keep the object the write returned, or read through racesafe's expectations.Client (wire.ControllerManagedBy gives one)"

func run(pass *analysis.Pass) (any, error) {
	fl := pass.ResultOf[flow.Analyzer].(*flow.Result)
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				check(pass, fl, fd.Body)
			}
		}
	}
	return nil, nil
}

func check(pass *analysis.Pass, fl *flow.Result, body *ast.BlockStmt) {
	rvChecked := resourceVersionChecks(pass, fl, body)
	line := func(p token.Pos) int { return pass.Fset.Position(p).Line }
	fl.Walk(body, flow.Visitor{Call: func(n *ast.CallExpr, c flow.Call, written flow.Written) {
		switch c.Verb {
		case flow.Get:
			v := fl.Root(c.Obj)
			if at, ok := written[v]; ok && c.Cached && !rvChecked(v, n.Pos()) {
				report.At(pass, n.Pos(), "regetwritten", fmt.Sprintf(
					"Get from the informer cache into %s, which this reconcile wrote at line %d: the cache may not show that write yet and puts the object back as it was before it; %s",
					v.Name(), line(at), fix))
			}
		case flow.None:
			fn := fl.Callee(n)
			s := fl.Of(fn)
			if s == nil {
				return
			}
			for j, a := range n.Args {
				v := fl.Root(a)
				if v == nil {
					continue
				}
				if at, ok := written[v]; ok && s.ReGets[j] && !rvChecked(v, n.Pos()) {
					report.At(pass, n.Pos(), "regetwritten", fmt.Sprintf(
						"%s Gets %s from the informer cache, and this reconcile wrote %s at line %d: the cache may not show that write yet and the helper puts the object back as it was before it; %s",
						fn.Name(), v.Name(), v.Name(), line(at), fix))
				}
			}
		}
	}})
}

// resourceVersionChecks returns whether a variable's resourceVersion is
// compared after a position: a reader that checks what it got is not
// reported.
func resourceVersionChecks(pass *analysis.Pass, fl *flow.Result, body *ast.BlockStmt) func(*types.Var, token.Pos) bool {
	checks := map[*types.Var][]token.Pos{}
	ast.Inspect(body, func(n ast.Node) bool {
		b, ok := n.(*ast.BinaryExpr)
		if !ok || (b.Op != token.EQL && b.Op != token.NEQ && b.Op != token.LSS && b.Op != token.GTR && b.Op != token.LEQ && b.Op != token.GEQ) {
			return true
		}
		for _, side := range []ast.Expr{b.X, b.Y} {
			if v := resourceVersionOf(fl, side); v != nil {
				checks[v] = append(checks[v], b.Pos())
			}
		}
		return true
	})
	return func(v *types.Var, after token.Pos) bool {
		for _, p := range checks[v] {
			if p > after {
				return true
			}
		}
		return false
	}
}

// resourceVersionOf returns x for x.ResourceVersion or x.GetResourceVersion().
func resourceVersionOf(fl *flow.Result, e ast.Expr) *types.Var {
	e = ast.Unparen(e)
	if call, ok := e.(*ast.CallExpr); ok {
		e = call.Fun
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "ResourceVersion" && sel.Sel.Name != "GetResourceVersion") {
		return nil
	}
	x := sel.X
	// item.ObjectMeta.ResourceVersion
	if inner, ok := x.(*ast.SelectorExpr); ok && inner.Sel.Name == "ObjectMeta" {
		x = inner.X
	}
	return fl.Root(x)
}
