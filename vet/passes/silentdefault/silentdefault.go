package silentdefault

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

// Analyzer reports phase switches that end the reconcile silently.
var Analyzer = flow.NewChecker("silentdefault",
	"report phase switches whose default ends the reconcile with an empty result and nil error",
	run)

func run(pass *analysis.Pass, fl *flow.Result) {
	for _, f := range pass.Files {
		// The statement after each switch or if, for a switch without a
		// default or an if-chain without a final else; and the ifs that are
		// the else of another, which belong to that one's chain.
		next := map[ast.Stmt]ast.Stmt{}
		elseIf := map[*ast.IfStmt]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			var list []ast.Stmt
			switch n := n.(type) {
			case *ast.BlockStmt:
				list = n.List
			case *ast.CaseClause:
				list = n.Body
			case *ast.IfStmt:
				if e, ok := n.Else.(*ast.IfStmt); ok {
					elseIf[e] = true
				}
			}
			for i, s := range list {
				if i+1 < len(list) {
					next[s] = list[i+1]
				}
			}
			return true
		})
		for fd := range flow.FuncDecls(f) {
			fl.Walk(fd.Body, flow.Visitor{
				Switch: func(sw *ast.SwitchStmt, written flow.Written) {
					checkSwitch(pass, fl, sw, next[sw], written)
				},
				If: func(s *ast.IfStmt, written flow.Written) {
					if !elseIf[s] {
						checkChain(pass, fl, s, next[s], written)
					}
				},
			})
		}
	}
}

func checkSwitch(pass *analysis.Pass, fl *flow.Result, sw *ast.SwitchStmt, after ast.Stmt, written flow.Written) {
	field, root := phaseField(fl, sw.Tag)
	if field == "" {
		return
	}
	var silent *ast.ReturnStmt
	where := "default of the switch"
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
	reportSilent(pass, fl, silent, where+" on "+field, field, root, written)
}

// checkChain checks an if / else-if chain whose every condition compares
// the same phase-like field (w.Status.Phase == A, or A || B of such), with
// at least two conditions: its final else, or the statement after it when
// it has none, is the chain's default.
func checkChain(pass *analysis.Pass, fl *flow.Result, head *ast.IfStmt, after ast.Stmt, written flow.Written) {
	var field string
	var root *types.Var
	conds := 0
	var last ast.Stmt // the final else's last statement
	for s := head; s != nil; {
		f, v := phaseComparison(fl, s.Cond)
		if f == "" || (field != "" && f != field) {
			return
		}
		field, root = f, v
		conds++
		switch e := s.Else.(type) {
		case *ast.IfStmt:
			s = e
		case *ast.BlockStmt:
			if len(e.List) == 0 {
				return
			}
			last, s = e.List[len(e.List)-1], nil
		default:
			s = nil
		}
	}
	if conds < 2 {
		return
	}
	where := "final else of the if-chain"
	if last == nil {
		last, where = after, "fall-through past the if-chain"
	}
	silent := silentReturn(pass.TypesInfo, last)
	if silent == nil {
		return
	}
	reportSilent(pass, fl, silent, where+" on "+field, field, root, written)
}

// phaseComparison returns the phase-like field cond compares for equality
// (x == A, A == x, or an || of such on one field) and its variable.
func phaseComparison(fl *flow.Result, cond ast.Expr) (string, *types.Var) {
	b, ok := ast.Unparen(cond).(*ast.BinaryExpr)
	if !ok {
		return "", nil
	}
	switch b.Op {
	case token.LOR:
		fx, vx := phaseComparison(fl, b.X)
		fy, _ := phaseComparison(fl, b.Y)
		if fx == "" || fx != fy {
			return "", nil
		}
		return fx, vx
	case token.EQL:
		if f, v := phaseField(fl, b.X); f != "" {
			return f, v
		}
		return phaseField(fl, b.Y)
	}
	return "", nil
}

func reportSilent(pass *analysis.Pass, fl *flow.Result, silent *ast.ReturnStmt, where, field string, root *types.Var, written flow.Written) {
	var why string
	if at, ok := written[root]; ok && root != nil {
		why = fmt.Sprintf("%s was written at line %d, so the %s switched on may be a stale cached read of it", root.Name(), pass.Fset.Position(at).Line, field)
	} else if fl.DropsStatusEvents {
		why = "this package filters events with GenerationChangedPredicate, so no status event brings the object back"
	} else {
		return
	}
	report.At(pass, silent.Pos(), "silentdefault", fmt.Sprintf(
		"the %s ends the reconcile with an empty result and a nil error: %s, and a %s nobody expected is never reconciled again; return an error or a requeue (requeue.Terminal, requeue.After) or dispatch with phase.Machine",
		where, why, lastName(field)))
}

// phaseField returns the switched-on expression as text when it selects a
// field whose name contains Phase or State, and the variable it is read
// from.
func phaseField(fl *flow.Result, tag ast.Expr) (string, *types.Var) {
	sel, ok := ast.Unparen(tag).(*ast.SelectorExpr)
	if !ok {
		return "", nil
	}
	if v, ok := fl.Info().ObjectOf(sel.Sel).(*types.Var); !ok || !v.IsField() {
		return "", nil // a constant such as api.PhaseRunning
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
