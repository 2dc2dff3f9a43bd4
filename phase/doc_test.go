package phase_test

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestDocCodeBlocksAreExamples: every code block in doc.go appears, line for
// line up to indentation, in example_test.go, whose Examples compile and run.
func TestDocCodeBlocksAreExamples(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	examples, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(examples), "\n")
	var blocks int
	for _, b := range new(comment.Parser).Parse(docText(f.Doc)).Content {
		code, ok := b.(*comment.Code)
		if !ok {
			continue
		}
		blocks++
		if !containsIndented(lines, strings.Split(strings.TrimSuffix(code.Text, "\n"), "\n")) {
			t.Errorf("doc.go code block not found in example_test.go:\n%s", code.Text)
		}
	}
	if blocks == 0 {
		t.Fatal("no code blocks found in doc.go")
	}
}

func docText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return g.Text()
}

// containsIndented reports whether block occurs in lines with every line
// indented by the same extra tabs.
func containsIndented(lines, block []string) bool {
	for i := 0; i+len(block) <= len(lines); i++ {
		prefix, ok := strings.CutSuffix(lines[i], block[0])
		if !ok || strings.Trim(prefix, "\t") != "" {
			continue
		}
		match := true
		for j, want := range block[1:] {
			got := lines[i+1+j]
			if want == "" && got == "" {
				continue
			}
			if got != prefix+want {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
