// Package report emits the racesafe checkers' diagnostics, in non-test
// files only, honouring the escape hatch: a "//racesafe:ignore <reason>" comment on the reported line
// or the line above it silences the report; one without a reason is
// reported instead, since a silenced race should say why it is safe.
package report

import (
	"go/ast"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

const directive = "//racesafe:ignore"

// At reports msg at pos unless an ignore directive with a reason covers it,
// or pos is in a _test.go file or a test harness package (an import path
// element e2e, test, tests, testutil or testutils): tests poll with Get after their own writes
// (Create, then Eventually Get) by design, and the races are the
// controller's.
func At(pass *analysis.Pass, pos token.Pos, category, msg string) {
	Diagnostic(pass, analysis.Diagnostic{Pos: pos, Category: category, Message: msg})
}

// Diagnostic reports d as At does, keeping its end and suggested fixes.
func Diagnostic(pass *analysis.Pass, d analysis.Diagnostic) {
	pos, category := d.Pos, d.Category
	if strings.HasSuffix(pass.Fset.Position(pos).Filename, "_test.go") || harness(pass.Pkg.Path()) {
		return
	}
	if c := directiveAt(pass, pos); c != nil {
		reason := strings.TrimPrefix(c.Text, directive)
		if i := strings.Index(reason, "//"); i >= 0 {
			reason = reason[:i] // another comment on the line is not the reason
		}
		reason = strings.TrimSpace(reason)
		if reason != "" {
			return
		}
		pass.Report(analysis.Diagnostic{Pos: c.Pos(), Category: category,
			Message: "racesafe:ignore needs a reason: say why this " + category + " report is safe"})
		return
	}
	pass.Report(d)
}

// directiveAt returns the ignore comment on pos's line or the line above.
func directiveAt(pass *analysis.Pass, pos token.Pos) *ast.Comment {
	tf := pass.Fset.File(pos)
	if tf == nil {
		return nil
	}
	line := tf.Line(pos)
	for _, f := range pass.Files {
		if pass.Fset.File(f.Pos()) != tf {
			continue
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if !strings.HasPrefix(c.Text, directive) {
					continue
				}
				if l := tf.Line(c.Pos()); l == line || l == line-1 {
					return c
				}
			}
		}
	}
	return nil
}

// harnessDirs are the import-path elements of test harness packages: the
// end-to-end suites operators keep in non-test files (test/e2e/setup)
// create and poll like tests do, and are not the controller.
var harnessDirs = map[string]bool{"e2e": true, "test": true, "tests": true, "testutil": true, "testutils": true}

// harness reports whether a package is a test harness by its import path.
func harness(path string) bool {
	for _, el := range strings.Split(path, "/") {
		if harnessDirs[el] {
			return true
		}
	}
	return false
}
