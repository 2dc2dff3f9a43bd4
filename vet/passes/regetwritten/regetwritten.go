package regetwritten

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/token"
	"go/types"
	"strconv"

	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/internal/flow"
	"github.com/racesafe/racesafe/vet/internal/report"
)

// Analyzer reports cached re-reads into written objects.
var Analyzer = flow.NewChecker("regetwritten",
	"report cached Gets into an object this reconcile wrote (the incident's stale re-read)",
	run)

const fix = "read into a fresh variable, keep the object the write returned, or read through racesafe's expectations.Client (wire.ControllerManagedBy gives one)"

func run(pass *analysis.Pass, fl *flow.Result) {
	for fd := range flow.FuncDecls(pass.Files...) {
		check(pass, fl, fd.Body)
	}
}

func check(pass *analysis.Pass, fl *flow.Result, body *ast.BlockStmt) {
	rvChecked := resourceVersionChecks(pass, fl, body)
	stmts := blockStatements(body)
	unwritten := fl.UnwrittenGuards(body)
	line := func(p token.Pos) int { return pass.Fset.Position(p).Line }
	fl.Walk(body, flow.Visitor{Call: func(n *ast.CallExpr, c flow.Call, written flow.Written) {
		switch c.Verb {
		case flow.Get:
			v := fl.Root(c.Obj)
			if at, ok := written[v]; ok && c.Cached && !rvChecked(v, n.Pos()) && !unwritten(v, n.Pos()) {
				d := analysis.Diagnostic{Pos: n.Pos(), End: n.End(), Category: "regetwritten", Message: fmt.Sprintf(
					"Get from the informer cache into %s, which this reconcile wrote at line %d: the cache may not show that write yet and puts the object back as it was before it; %s",
					v.Name(), line(at), fix)}
				if f, ok := freshLocalFix(pass, v, c.Obj, stmts[n]); ok {
					d.SuggestedFixes = []analysis.SuggestedFix{f}
				}
				report.Diagnostic(pass, d)
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

// freshName is the variable the suggested fix reads into.
const freshName = "latest"

// freshLocalFix rewrites a re-Get into v so that it reads into a new
// variable declared just before the statement holding the Get, and v keeps
// what the write returned: latest := &T{}; Get(ctx, key, latest). There is
// no fix when v's type cannot be named in the file (an interface, a type of
// a package the file does not import), or when the name is already in scope
// (the fix would shadow it or not compile).
func freshLocalFix(pass *analysis.Pass, v *types.Var, obj ast.Expr, stmt ast.Stmt) (analysis.SuggestedFix, bool) {
	if stmt == nil || obj == nil {
		return analysis.SuggestedFix{}, false
	}
	// Get(ctx, key, w) with w a *T, or Get(ctx, key, &w) with w a T.
	var elem types.Type
	if p, ok := v.Type().(*types.Pointer); ok {
		if _, addr := ast.Unparen(obj).(*ast.UnaryExpr); addr {
			return analysis.SuggestedFix{}, false
		}
		elem = p.Elem()
	} else if u, ok := ast.Unparen(obj).(*ast.UnaryExpr); ok && u.Op == token.AND {
		elem = v.Type()
	} else {
		return analysis.SuggestedFix{}, false
	}
	if _, ok := types.Unalias(elem).(*types.Named); !ok {
		return analysis.SuggestedFix{}, false
	}
	if _, ok := elem.Underlying().(*types.Struct); !ok {
		return analysis.SuggestedFix{}, false
	}
	file := fileOf(pass, stmt.Pos())
	if file == nil {
		return analysis.SuggestedFix{}, false
	}
	scope := pass.Pkg.Scope().Innermost(stmt.Pos())
	if scope == nil {
		return analysis.SuggestedFix{}, false
	}
	if _, taken := scope.LookupParent(freshName, stmt.Pos()); taken != nil {
		return analysis.SuggestedFix{}, false
	}
	named := true
	qual := func(p *types.Package) string {
		if p == pass.Pkg {
			return ""
		}
		for _, imp := range file.Imports {
			if path, err := strconv.Unquote(imp.Path.Value); err == nil && path == p.Path() {
				if imp.Name != nil {
					return imp.Name.Name
				}
				return p.Name()
			}
		}
		named = false
		return p.Name()
	}
	typ := types.TypeString(elem, qual)
	if !named {
		return analysis.SuggestedFix{}, false
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s := &%s{}\n", freshName, typ)
	if _, err := format.Source(append([]byte("package p\nfunc _() {\n"), append(buf.Bytes(), "_ = "+freshName+"\n}\n"...)...)); err != nil {
		return analysis.SuggestedFix{}, false
	}
	return analysis.SuggestedFix{
		Message: fmt.Sprintf("Get into a fresh %s and keep %s as the write returned it", freshName, v.Name()),
		TextEdits: []analysis.TextEdit{
			{Pos: stmt.Pos(), End: stmt.Pos(), NewText: buf.Bytes()},
			{Pos: obj.Pos(), End: obj.End(), NewText: []byte(freshName)},
		},
	}, true
}

// blockStatements maps each call in body to the statement holding it that
// sits directly in a block or a case clause: the place a declaration can be
// inserted before (an if's init cannot hold one). A call in a function
// literal maps to a statement of the literal's body.
func blockStatements(body *ast.BlockStmt) map[*ast.CallExpr]ast.Stmt {
	out := map[*ast.CallExpr]ast.Stmt{}
	var stack []ast.Node
	ast.Inspect(body, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		for i := len(stack) - 2; i > 0; i-- {
			if _, lit := stack[i].(*ast.FuncLit); lit {
				break
			}
			s, ok := stack[i].(ast.Stmt)
			if !ok {
				continue
			}
			switch stack[i-1].(type) {
			case *ast.BlockStmt, *ast.CaseClause, *ast.CommClause:
				out[call] = s
			}
			if out[call] != nil {
				break
			}
		}
		return true
	})
	return out
}

func fileOf(pass *analysis.Pass, pos token.Pos) *ast.File {
	for _, f := range pass.Files {
		if f.FileStart <= pos && pos <= f.FileEnd {
			return f
		}
	}
	return nil
}
