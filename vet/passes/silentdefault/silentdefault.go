package silentdefault

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/racesafe/racesafe/vet/internal/flow"
	"github.com/racesafe/racesafe/vet/internal/report"
)

// Analyzer reports phase switches that end the reconcile silently.
var Analyzer = &analysis.Analyzer{
	Name:     "silentdefault",
	Doc:      "report phase switches whose default ends the reconcile with an empty result and nil error",
	URL:      "https://github.com/racesafe/racesafe/blob/main/docs/vet.md#silentdefault",
	Requires: []*analysis.Analyzer{flow.Analyzer},
	Run:      run,
}

func run(pass *analysis.Pass) (any, error) {
	fl := pass.ResultOf[flow.Analyzer].(*flow.Result)
	for _, f := range pass.Files {
		// The statement after each switch, for a switch without a default.
		next := map[*ast.SwitchStmt]ast.Stmt{}
		ast.Inspect(f, func(n ast.Node) bool {
			var list []ast.Stmt
			switch n := n.(type) {
			case *ast.BlockStmt:
				list = n.List
			case *ast.CaseClause:
				list = n.Body
			}
			for i, s := range list {
				if sw, ok := s.(*ast.SwitchStmt); ok && i+1 < len(list) {
					next[sw] = list[i+1]
				}
			}
			return true
		})
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fl.Walk(fd.Body, flow.Visitor{Switch: func(sw *ast.SwitchStmt, written flow.Written) {
				check(pass, fl, sw, next[sw], written)
			}})
		}
	}
	return nil, nil
}

func check(pass *analysis.Pass, fl *flow.Result, sw *ast.SwitchStmt, after ast.Stmt, written flow.Written) {
	field, root := phaseField(fl, sw.Tag)
	if field == "" {
		return
	}
	var silent *ast.ReturnStmt
	where := "default"
	for _, c := range sw.Body.List {
		if cc, ok := c.(*ast.CaseClause); ok && cc.List == nil {
			if len(cc.Body) > 0 {
				silent = silentReturn(pass.TypesInfo, cc.Body[len(cc.Body)-1])
			}
			if silent == nil {
				return
			}
		}
	}
	if silent == nil {
		if silent = silentReturn(pass.TypesInfo, after); silent == nil {
			return
		}
		where = "fall-through past the switch"
	}
	var why string
	if at, ok := written[root]; ok && root != nil {
		why = fmt.Sprintf("%s was written at line %d, so the %s switched on may be a stale cached read of it", root.Name(), pass.Fset.Position(at).Line, field)
	} else if fl.DropsStatusEvents {
		why = "this package filters events with GenerationChangedPredicate, so no status event brings the object back"
	} else {
		return
	}
	report.At(pass, silent.Pos(), "silentdefault", fmt.Sprintf(
		"the %s of the switch on %s ends the reconcile with an empty result and a nil error: %s, and a %s nobody expected is never reconciled again; return an error or a requeue (requeue.Terminal, requeue.After) or dispatch with phase.Machine",
		where, field, why, lastName(field)))
}

// phaseField returns the switched-on expression as text when it selects a
// field whose name contains Phase or State, and the variable it is read
// from.
func phaseField(fl *flow.Result, tag ast.Expr) (string, *types.Var) {
	sel, ok := ast.Unparen(tag).(*ast.SelectorExpr)
	if !ok {
		return "", nil
	}
	name := strings.ToLower(sel.Sel.Name)
	if !strings.Contains(name, "phase") && !strings.Contains(name, "state") {
		return "", nil
	}
	return types.ExprString(sel), fl.RootOf(sel)
}

func lastName(field string) string {
	if i := strings.LastIndex(field, "."); i >= 0 {
		return strings.ToLower(field[i+1:])
	}
	return strings.ToLower(field)
}

// silentReturn returns s when it is `return <empty Result>, nil`.
func silentReturn(info *types.Info, s ast.Stmt) *ast.ReturnStmt {
	ret, ok := s.(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 2 {
		return nil
	}
	if id, ok := ast.Unparen(ret.Results[1]).(*ast.Ident); !ok || id.Name != "nil" {
		return nil
	}
	lit, ok := ast.Unparen(ret.Results[0]).(*ast.CompositeLit)
	if !ok || len(lit.Elts) > 0 {
		return nil
	}
	t, ok := types.Unalias(info.TypeOf(lit)).(*types.Named)
	if !ok || t.Obj().Name() != "Result" || t.Obj().Pkg() == nil || t.Obj().Pkg().Path() != flow.ReconcilePkg {
		return nil
	}
	return ret
}
