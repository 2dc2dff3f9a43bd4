// Package flow is what every racesafe checker needs to know of a
// controller's code: which calls are controller-runtime client reads and
// writes, whether a read is served by the informer cache, and, per
// function, which pointer parameters it re-reads from the cache or writes,
// and which kinds it Lists from the cache. Function summaries cross
// package boundaries as analysis facts.
package flow

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Package paths the checkers recognise.
const (
	ClientPkg    = "sigs.k8s.io/controller-runtime/pkg/client"
	ReconcilePkg = "sigs.k8s.io/controller-runtime/pkg/reconcile"
	PredicatePkg = "sigs.k8s.io/controller-runtime/pkg/predicate"
	RetryPkg     = "k8s.io/client-go/util/retry"
	UtilPkg      = "sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	racesafe     = "github.com/racesafe/racesafe/"
	kubeCtrlPkg  = "k8s.io/kubernetes/pkg/controller"
)

// Verb is what a client call does.
type Verb int

// The verbs.
const (
	None Verb = iota
	Get
	List
	Write  // Create, Update, Patch, Apply, of the object or a subresource
	Create // also a Write
	Delete
)

// Call is a classified client call.
type Call struct {
	Verb Verb
	// Obj is the object (or list) argument.
	Obj ast.Expr
	// Cached: a read served by the informer cache (a Reader that is not the
	// API reader or a direct client).
	Cached bool
	// Guarded: the call goes through racesafe (an expectations.Client or
	// Reader, a statusupdate.Patcher), which serves its own writes.
	Guarded bool
	// Method is the method's name.
	Method string
}

// Get reports whether the call is a Get.
func (c Call) Get() bool { return c.Verb == Get }

// liveName matches variables and fields that hold a reader of the API
// server rather than of the cache, by the names operators give them.
var liveName = regexp.MustCompile(`(?i)(api|live|direct|uncached|noncached)_?(reader|client)`)

// Result is the flow analysis of one package.
type Result struct {
	info *types.Info
	pass *analysis.Pass
	// live holds the variables and fields assigned a reader of the API
	// server somewhere in the package: GetAPIReader(), client.New.
	live  map[types.Object]bool
	local map[*types.Func]*Summary
	// unwritten caches UnwrittenGuards per function: summaries are
	// recomputed until they settle.
	unwritten map[*ast.FuncDecl]func(*types.Var, token.Pos) bool
	// Expectations: the package uses an expectations mechanism (racesafe's
	// expectations, kube's ControllerExpectations).
	Expectations bool
	// DropsStatusEvents: the package filters its events with
	// GenerationChangedPredicate, which drops status-only updates.
	DropsStatusEvents bool
}

// Summary is what a function does with its pointer parameters, by index
// (the receiver excluded).
type Summary struct {
	ReGets map[int]bool    // Gets into the parameter from the cache
	Writes map[int]bool    // updates or patches the parameter through a client
	Lists  map[string]bool // kinds it Lists from the cache
	// Live: it returns a reader of the API server (a test's or a
	// command's client.New behind a helper).
	Live bool
}

func (s *Summary) empty() bool {
	return len(s.ReGets) == 0 && len(s.Writes) == 0 && len(s.Lists) == 0 && !s.Live
}

// summaryFact carries a Summary across packages.
type summaryFact struct {
	ReGets, Writes []int
	Lists          []string
	Live           bool
}

func (*summaryFact) AFact() {}

func (f *summaryFact) String() string {
	return fmt.Sprintf("flow(regets=%v writes=%v lists=%v live=%v)", f.ReGets, f.Writes, f.Lists, f.Live)
}

// Uncached names kinds the controller reads live (controller-runtime's
// client.CacheOptions.DisableFor, set where the manager is built, often in
// another package than the reconciler): reads of them are not cached reads.
// Set it with the flag -racesafeflow.uncached=Kind,Kind; cmd/racesafevet
// fills it from the module's DisableFor lists when the flag is not given.
var Uncached = kindSet{}

type kindSet map[string]bool

func (k kindSet) String() string {
	var out []string
	for n := range k {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func (k kindSet) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			k[n] = true
		}
	}
	return nil
}

// Analyzer computes the flow of a package; the racesafe checkers require it.
var Analyzer = &analysis.Analyzer{
	Name:       "racesafeflow",
	Doc:        "summarises controller-runtime client reads and writes per function, for the racesafe checkers",
	Run:        run,
	FactTypes:  []analysis.Fact{new(summaryFact)},
	ResultType: reflect.TypeFor[*Result](),
}

func init() {
	Analyzer.Flags.Var(Uncached, "uncached", "comma-separated kinds the controller reads live (client.CacheOptions.DisableFor)")
	for _, k := range scanDisableFor(scanRoot()) {
		Uncached[k] = true
	}
}

func run(pass *analysis.Pass) (any, error) {
	r := &Result{info: pass.TypesInfo, pass: pass, live: map[types.Object]bool{}, local: map[*types.Func]*Summary{},
		unwritten: map[*ast.FuncDecl]func(*types.Var, token.Pos) bool{}}
	r.scanPackage()
	// Summaries of the package's functions, to a fixed point: a helper's
	// summary feeds its callers'.
	decls := slices.Collect(FuncDecls(pass.Files...))
	for range 8 {
		// Readers of the API server returned by the package's helpers are
		// known once their summaries are.
		r.scanPackage()
		changed := false
		for _, fd := range decls {
			fn, _ := pass.TypesInfo.Defs[fd.Name].(*types.Func)
			if fn == nil {
				continue
			}
			s := r.summarise(fd, fn)
			if old := r.local[fn]; old == nil || !sameSummary(old, s) {
				r.local[fn] = s
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for fn, s := range r.local {
		if s.empty() {
			continue
		}
		pass.ExportObjectFact(fn, s.fact())
	}
	return r, nil
}

func (s *Summary) fact() *summaryFact {
	f := &summaryFact{Live: s.Live}
	for i := range s.ReGets {
		f.ReGets = append(f.ReGets, i)
	}
	for i := range s.Writes {
		f.Writes = append(f.Writes, i)
	}
	for k := range s.Lists {
		f.Lists = append(f.Lists, k)
	}
	sort.Ints(f.ReGets)
	sort.Ints(f.Writes)
	sort.Strings(f.Lists)
	return f
}

func sameSummary(a, b *Summary) bool {
	return reflect.DeepEqual(a.fact(), b.fact())
}

// scanPackage finds the readers of the API server and the package-wide
// signals.
func (r *Result) scanPackage() {
	for _, f := range r.pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if i < len(n.Lhs) && r.isLiveSource(rhs) {
						if obj := r.objectOf(n.Lhs[i]); obj != nil {
							r.live[obj] = true
						}
					}
				}
			case *ast.KeyValueExpr:
				// A struct literal field set to a reader of the API server.
				if r.isLiveSource(n.Value) {
					if id, ok := n.Key.(*ast.Ident); ok {
						if obj := r.info.ObjectOf(id); obj != nil {
							r.live[obj] = true
						}
					}
				}
			case *ast.SelectorExpr:
				if obj := r.info.ObjectOf(n.Sel); obj != nil && obj.Pkg() != nil {
					path := obj.Pkg().Path()
					if strings.HasPrefix(path, racesafe+"expectations") || path == kubeCtrlPkg ||
						strings.Contains(obj.Name(), "Expectations") {
						r.Expectations = true
					}
					if path == PredicatePkg && obj.Name() == "GenerationChangedPredicate" {
						r.DropsStatusEvents = true
					}
				}
			}
			return true
		})
	}
}

// isLiveSource reports whether e yields a reader of the API server:
// mgr.GetAPIReader(), client.New(...), client.NewWithWatch(...).
func (r *Result) isLiveSource(e ast.Expr) bool {
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return false
	}
	fn := calleeFunc(r.info, call)
	if fn == nil {
		return false
	}
	if fn.Name() == "GetAPIReader" {
		return true
	}
	if s := r.local[fn]; s != nil && s.Live {
		return true
	}
	return fn.Pkg() != nil && fn.Pkg().Path() == ClientPkg && (fn.Name() == "New" || fn.Name() == "NewWithWatch")
}

// isLiveVar reports whether e names a variable or field that holds a reader
// of the API server.
func (r *Result) isLiveVar(e ast.Expr) bool {
	obj := r.objectOf(e)
	return obj != nil && r.live[obj]
}

// objectOf returns the variable or field an expression names.
func (r *Result) objectOf(e ast.Expr) types.Object {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return r.info.ObjectOf(e)
	case *ast.SelectorExpr:
		return r.info.ObjectOf(e.Sel)
	case *ast.StarExpr:
		return r.objectOf(e.X)
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			return r.objectOf(e.X)
		}
	}
	return nil
}

// Root returns the local variable or parameter an object argument names
// (item, &item, (item)), nil for anything else.
func (r *Result) Root(e ast.Expr) *types.Var {
	e = ast.Unparen(e)
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = ast.Unparen(u.X)
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil
	}
	v, _ := r.info.ObjectOf(id).(*types.Var)
	if v == nil || v.IsField() {
		return nil
	}
	return v
}

// RootOf returns the variable at the root of a selector chain
// (item.Status.Phase: item), nil when it is not a local or a parameter.
func (r *Result) RootOf(e ast.Expr) *types.Var {
	for {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return r.Root(e)
		}
		e = s.X
	}
}

func calleeFunc(info *types.Info, call *ast.CallExpr) *types.Func {
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		fn, _ := info.ObjectOf(f.Sel).(*types.Func)
		return fn
	case *ast.Ident:
		fn, _ := info.ObjectOf(f).(*types.Func)
		return fn
	case *ast.IndexExpr: // generic instantiation
		if id, ok := f.X.(*ast.Ident); ok {
			fn, _ := info.ObjectOf(id).(*types.Func)
			return fn
		}
	}
	return nil
}

// Callee returns the function a call calls, nil for a call of a func value.
func (r *Result) Callee(call *ast.CallExpr) *types.Func { return calleeFunc(r.info, call) }

// Classify tells what a client call does.
func (r *Result) Classify(call *ast.CallExpr) Call {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return Call{}
	}
	fn, _ := r.info.ObjectOf(sel.Sel).(*types.Func)
	if fn == nil || fn.Pkg() == nil {
		return Call{}
	}
	path := fn.Pkg().Path()
	guarded := strings.HasPrefix(path, racesafe)
	if path != ClientPkg && !guarded {
		return Call{}
	}
	c := Call{Method: fn.Name(), Guarded: guarded}
	arg := func(i int) ast.Expr {
		if i < len(call.Args) {
			return call.Args[i]
		}
		return nil
	}
	sub := isSubResourceWriter(fn)
	switch fn.Name() {
	case "Get":
		if sub {
			return Call{}
		}
		c.Verb, c.Obj = Get, arg(2)
	case "List":
		c.Verb, c.Obj = List, arg(1)
	case "Create":
		if sub {
			return Call{} // a subresource create: an eviction, a token
		}
		c.Verb, c.Obj = Create, arg(1)
	case "Update", "Patch", "Apply":
		c.Verb, c.Obj = Write, arg(1)
	case "Delete":
		c.Verb, c.Obj = Delete, arg(1)
	default:
		return Call{}
	}
	if c.Verb == Get || c.Verb == List {
		c.Cached = !guarded && !r.isLiveReader(sel.X) && !Uncached[r.Kind(c.Obj, c.Verb == List)]
	}
	return c
}

// isSubResourceWriter reports whether fn is a method of a status or
// subresource client.
func isSubResourceWriter(fn *types.Func) bool {
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Recv() == nil {
		return false
	}
	t := sig.Recv().Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	if !ok {
		return false
	}
	name := n.Obj().Name()
	return strings.Contains(name, "SubResource") || strings.Contains(name, "Status")
}

// isLiveReader reports whether the receiver of a read is a reader of the API
// server rather than of the cache.
func (r *Result) isLiveReader(x ast.Expr) bool {
	x = ast.Unparen(x)
	if call, ok := x.(*ast.CallExpr); ok {
		return r.isLiveSource(call)
	}
	obj := r.objectOf(x)
	if obj == nil {
		// An embedded client: r.Get on a struct that embeds client.Client
		// is the manager's client, which reads the cache.
		return false
	}
	if r.live[obj] {
		return true
	}
	return liveName.MatchString(obj.Name())
}

// Of returns the summary of fn, from this package or a fact; nil when it
// does nothing the checkers track.
func (r *Result) Of(fn *types.Func) *Summary {
	if fn == nil {
		return nil
	}
	if s := r.local[fn]; s != nil {
		return s
	}
	var f summaryFact
	if fn.Pkg() == nil || fn.Pkg() == r.pass.Pkg || !r.pass.ImportObjectFact(fn, &f) {
		return nil
	}
	s := &Summary{ReGets: map[int]bool{}, Writes: map[int]bool{}, Lists: map[string]bool{}, Live: f.Live}
	for _, i := range f.ReGets {
		s.ReGets[i] = true
	}
	for _, i := range f.Writes {
		s.Writes[i] = true
	}
	for _, k := range f.Lists {
		s.Lists[k] = true
	}
	return s
}

// Kind returns the kind name of an object or list argument's type: the
// named type's name, less "List" for a list; "" when it cannot tell (an
// unstructured or metadata-only object, an interface).
func (r *Result) Kind(e ast.Expr, list bool) string {
	return KindOf(r.info.TypeOf(e), list)
}

// KindOf is Kind for a type.
func KindOf(t types.Type, list bool) string {
	if t == nil {
		return ""
	}
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	if !ok {
		return ""
	}
	name := n.Obj().Name()
	switch name {
	case "Unstructured", "UnstructuredList", "PartialObjectMetadata", "PartialObjectMetadataList":
		return ""
	}
	if list {
		if !strings.HasSuffix(name, "List") {
			return ""
		}
		return strings.TrimSuffix(name, "List")
	}
	return name
}

// summarise computes fn's summary from its body and its callees' summaries.
func (r *Result) summarise(fd *ast.FuncDecl, fn *types.Func) *Summary {
	s := &Summary{ReGets: map[int]bool{}, Writes: map[int]bool{}, Lists: map[string]bool{}}
	sig := fn.Type().(*types.Signature)
	index := map[*types.Var]int{}
	for i := 0; i < sig.Params().Len(); i++ {
		// A pointer, or an interface such as client.Object: a helper that
		// Gets into an obj client.Object overwrites its caller's object.
		p := sig.Params().At(i)
		switch p.Type().Underlying().(type) {
		case *types.Pointer, *types.Interface:
			index[p] = i
		}
	}
	unwritten := r.unwritten[fd]
	if unwritten == nil {
		unwritten = r.UnwrittenGuards(fd.Body)
		r.unwritten[fd] = unwritten
	}
	// fn's own returns, not those of its function literals.
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if ret, ok := n.(*ast.ReturnStmt); ok {
			for _, e := range ret.Results {
				if r.isLiveSource(e) || r.isLiveVar(e) {
					s.Live = true
				}
			}
		}
		return true
	})
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		c := r.Classify(call)
		switch c.Verb {
		case Get:
			if v := r.Root(c.Obj); c.Cached && !unwritten(v, call.Pos()) {
				if i, ok := index[v]; ok {
					s.ReGets[i] = true
				}
			}
		case List:
			if c.Cached {
				if k := r.Kind(c.Obj, true); k != "" {
					s.Lists[k] = true
				}
			}
		case Write: // as in Written, a Create is not a write of an older copy
			if i, ok := index[r.Root(c.Obj)]; ok {
				s.Writes[i] = true
			}
		case None:
			callee := r.Of(r.Callee(call))
			if callee == nil {
				return true
			}
			for j, a := range call.Args {
				i, ok := index[r.Root(a)]
				if !ok {
					continue
				}
				if callee.ReGets[j] {
					s.ReGets[i] = true
				}
				if callee.Writes[j] {
					s.Writes[i] = true
				}
			}
			for k := range callee.Lists {
				s.Lists[k] = true
			}
		}
		return true
	})
	return s
}

// Info returns the package's type information.
func (r *Result) Info() *types.Info { return r.info }

// UnwrittenGuards returns whether a position in body lies in the then
// branch of an if that tests that a variable's UID or resourceVersion is
// empty (x.GetUID() == "", x.ResourceVersion == ""): an object the API
// server has answered for, by a read or a write, has both, so a Get there
// fills in an object nothing wrote yet.
func (r *Result) UnwrittenGuards(body ast.Node) func(v *types.Var, pos token.Pos) bool {
	type guard struct {
		v        *types.Var
		from, to token.Pos
	}
	var guards []guard
	// Views of an object under another name: m := o.(metav1.Object),
	// m := o.GetObjectMeta(), m := &o.ObjectMeta.
	alias := map[*types.Var]*types.Var{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE && len(n.Rhs) == 1 {
				if lhs, of := r.Root(n.Lhs[0]), r.viewOf(n.Rhs[0]); lhs != nil && of != nil {
					if a := alias[of]; a != nil {
						of = a
					}
					alias[lhs] = of
				}
			}
		case *ast.IfStmt:
			for _, v := range r.emptyIdentity(n.Cond) {
				if a := alias[v]; a != nil {
					v = a
				}
				guards = append(guards, guard{v, n.Body.Pos(), n.Body.End()})
			}
		}
		return true
	})
	return func(v *types.Var, pos token.Pos) bool {
		for _, g := range guards {
			if g.v == v && g.from <= pos && pos < g.to {
				return true
			}
		}
		return false
	}
}

// emptyIdentity returns the variables cond requires to have an empty UID or
// resourceVersion: the comparison itself, or a conjunct of an &&.
func (r *Result) emptyIdentity(cond ast.Expr) []*types.Var {
	cond = ast.Unparen(cond)
	b, ok := cond.(*ast.BinaryExpr)
	if !ok {
		return nil
	}
	if b.Op == token.LAND {
		return append(r.emptyIdentity(b.X), r.emptyIdentity(b.Y)...)
	}
	if b.Op != token.EQL {
		return nil
	}
	for _, pair := range [][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
		if lit, ok := ast.Unparen(pair[1]).(*ast.BasicLit); !ok || lit.Value != `""` {
			continue
		}
		if v := r.identityOf(pair[0]); v != nil {
			return []*types.Var{v}
		}
	}
	return nil
}

// identityOf returns x for x.UID, x.ResourceVersion, x.GetUID(),
// x.GetResourceVersion(), and the same through ObjectMeta or
// GetObjectMeta().
func (r *Result) identityOf(e ast.Expr) *types.Var {
	e = ast.Unparen(e)
	if call, ok := e.(*ast.CallExpr); ok && len(call.Args) == 0 {
		e = call.Fun
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	switch sel.Sel.Name {
	case "UID", "GetUID", "ResourceVersion", "GetResourceVersion":
	default:
		return nil
	}
	x := ast.Unparen(sel.X)
	if call, ok := x.(*ast.CallExpr); ok && len(call.Args) == 0 {
		x = call.Fun // x.GetObjectMeta()
	}
	if inner, ok := x.(*ast.SelectorExpr); ok && (inner.Sel.Name == "ObjectMeta" || inner.Sel.Name == "GetObjectMeta") {
		x = inner.X
	}
	return r.Root(x)
}

// viewOf returns o when e is o.(T), o.GetObjectMeta(), o.ObjectMeta or
// &o.ObjectMeta.
func (r *Result) viewOf(e ast.Expr) *types.Var {
	e = ast.Unparen(e)
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = ast.Unparen(u.X)
	}
	switch x := e.(type) {
	case *ast.TypeAssertExpr:
		return r.Root(x.X)
	case *ast.CallExpr:
		if sel, ok := ast.Unparen(x.Fun).(*ast.SelectorExpr); ok && len(x.Args) == 0 && sel.Sel.Name == "GetObjectMeta" {
			return r.Root(sel.X)
		}
	case *ast.SelectorExpr:
		if x.Sel.Name == "ObjectMeta" {
			return r.Root(x.X)
		}
	}
	return nil
}
