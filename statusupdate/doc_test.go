package statusupdate_test

import (
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// Every code block of the package doc appears, line for line whatever the
// indentation, in example_test.go, where it compiles and runs.
func TestDocCodeBlocksAreExamples(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	examples := trimLines(string(src))
	blocks := 0
	for _, b := range new(comment.Parser).Parse(f.Doc.Text()).Content {
		code, ok := b.(*comment.Code)
		if !ok {
			continue
		}
		blocks++
		if !strings.Contains("\n"+examples+"\n", "\n"+trimLines(code.Text)+"\n") {
			t.Errorf("doc.go code block is not in example_test.go:\n%s", code.Text)
		}
	}
	if blocks == 0 {
		t.Fatal("doc.go has no code blocks: the parse is broken")
	}
}

// trimLines drops each line's leading tabs and the trailing newline.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
	}
	return strings.Join(lines, "\n")
}
