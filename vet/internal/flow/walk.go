package flow

import (
	"go/ast"
	"go/token"
	"go/types"
	"maps"
)

// Written is the set of variables a path has written through a client
// (Update, Patch, Apply, of the object or a subresource; or through a
// helper that writes its parameter), with where.
type Written map[*types.Var]token.Pos

// Visitor is called along the paths of a function body. Call sees every call
// in evaluation order with what the path has written before it; Switch sees
// every switch statement with what was written before its tag.
type Visitor struct {
	Call   func(call *ast.CallExpr, c Call, w Written)
	Switch func(s *ast.SwitchStmt, w Written)
	// If sees every if statement, else-ifs included, with what was
	// written before its condition.
	If func(s *ast.IfStmt, w Written)
}

// Walk follows body's paths: branches of an if or a switch start from what
// was written before them, and what follows them sees the union of the
// branches that do not end in a return; a loop body is walked once. A
// function literal is walked where it appears, as RetryOnConflict runs it.
func (r *Result) Walk(body *ast.BlockStmt, v Visitor) {
	r.block(body.List, Written{}, v)
}

// block walks stmts and returns the state after them, nil when they end
// the path (a return, a panic, a branch).
func (r *Result) block(stmts []ast.Stmt, w Written, v Visitor) Written {
	for i, s := range stmts {
		// err := c.Create(ctx, x); if err != nil {...}: the if's then
		// branch is the path where the write failed.
		if ifs, ok := s.(*ast.IfStmt); ok && ifs.Init == nil && i > 0 {
			if root, at := r.failedWrite(stmts[i-1], ifs.Cond); root != nil && w != nil && w[root] == at {
				w = r.ifStmt(ifs, root, w, v)
				if w == nil {
					return nil
				}
				continue
			}
		}
		if w = r.stmt(s, w, v); w == nil {
			return nil
		}
	}
	return w
}

// failedWrite returns the variable written by the client write that
// assign (err := c.Update(ctx, x), or the init of an if) makes, and the
// write's position, when cond tests that write's error for failure:
// err != nil, or a call of err (apierrors.IsAlreadyExists(err)).
func (r *Result) failedWrite(assign ast.Stmt, cond ast.Expr) (*types.Var, token.Pos) {
	as, ok := assign.(*ast.AssignStmt)
	if !ok || len(as.Rhs) != 1 || len(as.Lhs) != 1 {
		return nil, token.NoPos
	}
	call, ok := ast.Unparen(as.Rhs[0]).(*ast.CallExpr)
	if !ok {
		return nil, token.NoPos
	}
	c := r.Classify(call)
	if c.Verb != Write && c.Verb != Create {
		return nil, token.NoPos
	}
	errVar := r.Root(as.Lhs[0])
	root := r.Root(c.Obj)
	if errVar == nil || root == nil || !r.testsFailure(cond, errVar) {
		return nil, token.NoPos
	}
	return root, call.Pos()
}

// testsFailure reports whether cond, or a conjunct of it, holds only when
// err is not nil.
func (r *Result) testsFailure(cond ast.Expr, err *types.Var) bool {
	switch c := ast.Unparen(cond).(type) {
	case *ast.BinaryExpr:
		switch c.Op {
		case token.LAND:
			return r.testsFailure(c.X, err) || r.testsFailure(c.Y, err)
		case token.NEQ:
			id, ok := ast.Unparen(c.Y).(*ast.Ident)
			return ok && id.Name == "nil" && r.Root(c.X) == err
		}
	case *ast.CallExpr:
		for _, a := range c.Args {
			if r.Root(a) == err {
				return true
			}
		}
	}
	return false
}

// ifStmt walks an if's condition and both branches, and returns what is
// written after it. failed is the variable whose write failed when the then
// branch runs (if err := c.Update(ctx, x); err != nil): that branch starts
// without x's write. With failed nil it starts with every write before.
func (r *Result) ifStmt(s *ast.IfStmt, failed *types.Var, w Written, v Visitor) Written {
	r.expr(s.Cond, w, v)
	if v.If != nil {
		v.If(s, w)
	}
	start := maps.Clone(w)
	if failed != nil {
		delete(start, failed)
	}
	then := r.block(s.Body.List, start, v)
	var els Written
	if s.Else != nil {
		els = r.stmt(s.Else, maps.Clone(w), v)
	} else {
		els = w
	}
	if then == nil && els == nil {
		return nil
	}
	return union(then, els)
}

func union(states ...Written) Written {
	var out Written
	for _, s := range states {
		if s == nil {
			continue
		}
		if out == nil {
			out = Written{}
		}
		for k, p := range s {
			if q, ok := out[k]; !ok || p > q {
				out[k] = p
			}
		}
	}
	return out
}

func (r *Result) stmt(s ast.Stmt, w Written, v Visitor) Written {
	switch s := s.(type) {
	case *ast.BlockStmt:
		return r.block(s.List, w, v)
	case *ast.IfStmt:
		if s.Init != nil {
			w = r.stmt(s.Init, w, v)
			if root, at := r.failedWrite(s.Init, s.Cond); root != nil && w != nil && w[root] == at {
				return r.ifStmt(s, root, w, v)
			}
		}
		return r.ifStmt(s, nil, w, v)
	case *ast.SwitchStmt:
		if s.Init != nil {
			w = r.stmt(s.Init, w, v)
		}
		if s.Tag != nil {
			r.expr(s.Tag, w, v)
		}
		if v.Switch != nil {
			v.Switch(s, w)
		}
		return r.clauses(s.Body, w, v)
	case *ast.TypeSwitchStmt:
		if s.Init != nil {
			w = r.stmt(s.Init, w, v)
		}
		w = r.stmt(s.Assign, w, v)
		return r.clauses(s.Body, w, v)
	case *ast.SelectStmt:
		return r.clauses(s.Body, w, v)
	case *ast.ForStmt:
		if s.Init != nil {
			w = r.stmt(s.Init, w, v)
		}
		if s.Cond != nil {
			r.expr(s.Cond, w, v)
		}
		return union(w, r.block(s.Body.List, maps.Clone(w), v))
	case *ast.RangeStmt:
		r.expr(s.X, w, v)
		return union(w, r.block(s.Body.List, maps.Clone(w), v))
	case *ast.LabeledStmt:
		return r.stmt(s.Stmt, w, v)
	case *ast.ReturnStmt:
		for _, e := range s.Results {
			r.expr(e, w, v)
		}
		return nil
	case *ast.BranchStmt:
		if s.Tok == token.FALLTHROUGH {
			return w
		}
		return nil
	case *ast.AssignStmt:
		for _, e := range s.Rhs {
			if lit, ok := ast.Unparen(e).(*ast.FuncLit); ok {
				// create := func() error {...}: stored to run later, if
				// at all; its body is checked on its own.
				r.block(lit.Body.List, Written{}, v)
				continue
			}
			r.expr(e, w, v)
		}
		if s.Tok != token.DEFINE {
			for _, lhs := range s.Lhs {
				if root := r.Root(lhs); root != nil {
					delete(w, root) // a new object in the variable
				}
			}
		}
		return w
	case *ast.ExprStmt:
		r.expr(s.X, w, v)
		if call, ok := s.X.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" {
				return nil
			}
		}
		return w
	case *ast.DeferStmt:
		// Runs when the function returns: what it writes does not precede
		// the statements after it.
		r.expr(s.Call, maps.Clone(w), v)
		return w
	case *ast.GoStmt:
		r.expr(s.Call, maps.Clone(w), v)
		return w
	default:
		// Declarations, sends, inc/dec: their expressions in order.
		ast.Inspect(s, func(n ast.Node) bool {
			if e, ok := n.(ast.Expr); ok {
				r.expr(e, w, v)
				return false
			}
			return true
		})
		return w
	}
}

// clauses walks the case clauses of a switch or select from w.
func (r *Result) clauses(body *ast.BlockStmt, w Written, v Visitor) Written {
	var outs []Written
	hasDefault := false
	for _, c := range body.List {
		switch c := c.(type) {
		case *ast.CaseClause:
			if c.List == nil {
				hasDefault = true
			}
			for _, e := range c.List {
				r.expr(e, w, v)
			}
			outs = append(outs, r.block(c.Body, maps.Clone(w), v))
		case *ast.CommClause:
			if c.Comm == nil {
				hasDefault = true
			}
			st := maps.Clone(w)
			if c.Comm != nil {
				st = r.stmt(c.Comm, st, v)
			}
			outs = append(outs, r.block(c.Body, st, v))
		}
	}
	if !hasDefault {
		outs = append(outs, w)
	}
	return union(outs...)
}

// expr visits the calls of e in order, walking function literals as blocks,
// and records the writes they make.
func (r *Result) expr(e ast.Expr, w Written, v Visitor) {
	if e == nil || w == nil {
		return
	}
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			r.block(n.Body.List, w, v)
			return false
		case *ast.CallExpr:
			// Arguments are evaluated before the call.
			for _, a := range n.Args {
				r.expr(a, w, v)
			}
			switch f := ast.Unparen(n.Fun).(type) {
			case *ast.SelectorExpr:
				r.expr(f.X, w, v)
			case *ast.FuncLit: // func() {...}(): runs here
				r.block(f.Body.List, w, v)
			}
			r.call(n, w, v)
			return false
		}
		return true
	})
}

func (r *Result) call(n *ast.CallExpr, w Written, v Visitor) {
	c := r.Classify(n)
	if v.Call != nil {
		v.Call(n, c, w)
	}
	switch c.Verb {
	case Write:
		// Not a Create: after a successful Create there is no older copy
		// for the cache to put back (it answers NotFound, or the created
		// object), and a Get after a failed one reads what exists.
		if root := r.Root(c.Obj); root != nil {
			w[root] = n.Pos()
		}
	case None:
		s := r.Of(r.Callee(n))
		if s == nil {
			return
		}
		for j, a := range n.Args {
			if root := r.Root(a); root != nil && s.Writes[j] {
				w[root] = n.Pos()
			}
		}
	}
}
