package flow

import (
	"go/ast"
)

// RetryBodies returns the function literals run by conflict retries in
// body: retry.RetryOnConflict, and retry.OnError retrying on
// apierrors.IsConflict. Other retries (of a command, on any error) are not
// conflict retries.
func (r *Result) RetryBodies(body ast.Node) []*ast.FuncLit {
	var out []*ast.FuncLit
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := r.Callee(call)
		if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != RetryPkg {
			return true
		}
		switch fn.Name() {
		case "RetryOnConflict":
		case "OnError":
			if len(call.Args) != 3 {
				return true
			}
			pred := r.objectOf(call.Args[1])
			if pred == nil || pred.Name() != "IsConflict" {
				return true
			}
		default:
			return true
		}
		if lit, ok := ast.Unparen(call.Args[len(call.Args)-1]).(*ast.FuncLit); ok {
			out = append(out, lit)
		}
		return true
	})
	return out
}
