package flow

import (
	"go/ast"
)

// RetryBodies returns the function literals run by retry.RetryOnConflict
// (and retry.OnError) calls in body.
func (r *Result) RetryBodies(body ast.Node) []*ast.FuncLit {
	var out []*ast.FuncLit
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := r.Callee(call)
		if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != RetryPkg || (fn.Name() != "RetryOnConflict" && fn.Name() != "OnError") {
			return true
		}
		if lit, ok := ast.Unparen(call.Args[len(call.Args)-1]).(*ast.FuncLit); ok {
			out = append(out, lit)
		}
		return true
	})
	return out
}
