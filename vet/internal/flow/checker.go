package flow

import (
	"go/ast"
	"iter"

	"golang.org/x/tools/go/analysis"
)

// docsURL is where each checker's documentation starts; a checker's own
// section is its name as the anchor.
const docsURL = "https://github.com/racesafe/racesafe/blob/main/docs/vet.md#"

// NewChecker returns the analyzer of one racesafe checker: named name,
// documented by doc and by its section of docs/vet.md, requiring the flow
// analysis, and running check with the flow of the package. Every checker
// is built here so that none can forget the Requires (its ResultOf would
// be nil) or point its URL elsewhere.
func NewChecker(name, doc string, check func(pass *analysis.Pass, fl *Result)) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:     name,
		Doc:      doc,
		URL:      docsURL + name,
		Requires: []*analysis.Analyzer{Analyzer},
		Run: func(pass *analysis.Pass) (any, error) {
			check(pass, pass.ResultOf[Analyzer].(*Result))
			return nil, nil
		},
	}
}

// FuncDecls yields the functions declared with a body in files, in order:
// what the checkers and the summaries walk. A declaration without a body
// (implemented in assembly) has nothing to walk.
func FuncDecls(files ...*ast.File) iter.Seq[*ast.FuncDecl] {
	return func(yield func(*ast.FuncDecl) bool) {
		for _, f := range files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					if !yield(fd) {
						return
					}
				}
			}
		}
	}
}
