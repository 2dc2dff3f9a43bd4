// Package doccheck keeps the code shown in the documentation compiling. It has
// only this test: every ```go block of README.md and docs/*.md, and every code
// block of a doc.go package comment, must have a compiled twin.
//
// A twin is the block's lines, whitespace aside, in the same order and with
// nothing between them, inside the code of a .go file that go build, go vet
// and go test compile: in practice the body of an Example in an
// example_test.go. Compiling the blocks themselves would not work: most are
// fragments (a switch branch, a call that reads a receiver's field), and
// wrapping each in made-up imports and declarations would either reject good
// fragments or accept anything. A twin leaves the proof to the compiler, on
// code the test suite already builds, and keeps the doc and the Example from
// drifting apart: change either, and this test names the block.
//
// Lines in comments outside function bodies and in multi-line string
// literals do not count as code, so a doc.go cannot be its own twin. Comments
// inside a function body do count: a block's "// ... set up, then:" lines
// belong in the Example too.
//
// Set RACESAFE_DOCCHECK_SKIP to skip the check.
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// block is one code block of the documentation.
type block struct {
	file  string   // path relative to the module root, slash-separated
	line  int      // line of the block's first code line, 1-based
	kind  string   // "```go block" or "doc.go code block"
	lines []string // the block's code, one entry a line
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// codeLine is a normalised line of compiled code and where it is.
type codeLine struct {
	text string
	line int
}

// codeFile is a compiled Go file, its code lines normalised.
type codeFile struct {
	path  string
	lines []codeLine
}

func TestDocBlocksHaveCompiledTwins(t *testing.T) {
	if os.Getenv("RACESAFE_DOCCHECK_SKIP") != "" {
		t.Skip("RACESAFE_DOCCHECK_SKIP is set")
	}
	root := moduleRoot(t)
	blocks, code := scanModule(t, root)
	if len(blocks) == 0 {
		t.Fatalf("found no code blocks under %s; the scan is broken", root)
	}
	if len(code) == 0 {
		t.Fatalf("found no compiled Go files under %s; the scan is broken", root)
	}
	for _, b := range blocks {
		if msg, ok := twin(b, code); !ok {
			t.Errorf("%s", msg)
		}
	}
}

// twin reports whether b has a compiled twin in code; when it has not, msg
// says so and points at the closest candidate.
func twin(b block, code []codeFile) (msg string, ok bool) {
	want := normalise(b.lines)
	if len(want) == 0 {
		return "", true
	}
	var best struct {
		path string
		line int
		n    int // leading lines of want matched
	}
	for _, f := range code {
		for i := range f.lines {
			n := 0
			for n < len(want) && i+n < len(f.lines) && f.lines[i+n].text == want[n] {
				n++
			}
			if n == len(want) {
				return "", true
			}
			if n > best.n {
				best.path, best.line, best.n = f.path, f.lines[i].line, n
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %s (%d lines) has no compiled twin.\n", b, b.kind, len(want))
	fmt.Fprintf(&sb, "\tfirst line: %s\n", want[0])
	if best.n > 0 {
		fmt.Fprintf(&sb, "\tclosest: %s:%d matches its first %d lines; then the block has %q\n",
			best.path, best.line, best.n, want[best.n])
	}
	sb.WriteString("\tAdd a runnable Example (example_test.go) whose body holds these lines as they are," +
		" or change the block to match an Example that compiles.")
	return sb.String(), false
}

// normalise collapses the whitespace of each line and drops the empty ones:
// indentation and blank lines differ between Markdown, doc comments and
// gofmt'd code without changing what the code says.
func normalise(lines []string) []string {
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// moduleRoot walks up from the working directory to the folder of go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// scanModule collects the documentation's blocks and the module's compiled
// code. It skips what the go command skips (testdata, folders starting with
// "." or "_", nested modules) and files whose build constraints exclude them.
func scanModule(t *testing.T, root string) ([]block, []codeFile) {
	t.Helper()
	var blocks []block
	for _, name := range []string{"README.md"} {
		blocks = append(blocks, markdownFile(t, root, name)...)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range docs {
		rel, _ := filepath.Rel(root, p)
		blocks = append(blocks, markdownFile(t, root, rel)...)
	}

	var code []codeFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p == root {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		if match, err := build.Default.MatchFile(filepath.Dir(p), name); err != nil || !match {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
		if err != nil {
			// It does not compile, so it is no twin; its package's own
			// build reports it.
			return nil
		}
		if name == "doc.go" {
			blocks = append(blocks, docCommentBlocks(fset, f, rel)...)
		}
		code = append(code, codeFile{path: rel, lines: codeLines(fset, f, src)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return blocks, code
}

func markdownFile(t *testing.T, root, rel string) []block {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, rel))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return markdownBlocks(filepath.ToSlash(rel), src)
}

// markdownBlocks returns the fenced blocks tagged go (or golang). Blocks in
// another language or with no tag (sh, console, diff, text, output) are not
// Go and are left out.
func markdownBlocks(file string, src []byte) []block {
	var (
		out    []block
		cur    *block
		fence  string // the opening fence's run of backticks or tildes
		indent int    // the opening fence's indentation, stripped from its lines
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" {
			run := fenceRun(trimmed)
			if run == "" {
				continue
			}
			fence, indent = run, len(line)-len(trimmed)
			lang := ""
			if f := strings.Fields(trimmed[len(run):]); len(f) > 0 {
				lang = strings.ToLower(strings.Trim(f[0], "{}."))
			}
			if lang == "go" || lang == "golang" {
				cur = &block{file: file, line: n + 1, kind: "```go block"}
			}
			continue
		}
		if run := fenceRun(trimmed); len(run) >= len(fence) && run[0] == fence[0] && strings.TrimSpace(trimmed[len(run):]) == "" {
			if cur != nil {
				out = append(out, *cur)
			}
			cur, fence = nil, ""
			continue
		}
		if cur != nil {
			for i := 0; i < indent && strings.HasPrefix(line, " "); i++ {
				line = line[1:]
			}
			cur.lines = append(cur.lines, line)
		}
	}
	if cur != nil { // unclosed: runs to the end of the file, as in CommonMark
		out = append(out, *cur)
	}
	return out
}

// fenceRun returns the leading run of three or more backticks or tildes.
func fenceRun(s string) string {
	for _, c := range []string{"`", "~"} {
		n := len(s) - len(strings.TrimLeft(s, c))
		if n >= 3 {
			return s[:n]
		}
	}
	return ""
}

// docCommentBlocks returns the code blocks of f's package comment in gofmt's
// form: lines "//\t...", possibly with blank "//" lines between them.
func docCommentBlocks(fset *token.FileSet, f *ast.File, file string) []block {
	if f.Doc == nil {
		return nil
	}
	var (
		out   []block
		cur   *block
		blank int // blank comment lines seen since the last code line
	)
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
		}
		cur, blank = nil, 0
	}
	for _, c := range f.Doc.List {
		line := fset.Position(c.Slash).Line
		for i, text := range strings.Split(c.Text, "\n") {
			switch {
			case strings.HasPrefix(text, "//\t"):
				if cur == nil {
					cur = &block{file: file, line: line + i, kind: "doc.go code block"}
				}
				for ; blank > 0; blank-- {
					cur.lines = append(cur.lines, "")
				}
				cur.lines = append(cur.lines, strings.TrimPrefix(text, "//\t"))
			case strings.TrimSpace(text) == "//" && cur != nil:
				blank++
			default:
				flush()
			}
		}
	}
	flush()
	return out
}

// codeLines returns src's lines normalised, without the comments that lie
// outside function bodies and without the inside of multi-line string
// literals: only code, and comments within code, can be a twin.
func codeLines(fset *token.FileSet, f *ast.File, src []byte) []codeLine {
	tf := fset.File(f.Pos())
	masked := slices.Clone(src)
	blankOut := func(from, to token.Pos) {
		for i := tf.Offset(from); i < tf.Offset(to) && i < len(masked); i++ {
			if masked[i] != '\n' {
				masked[i] = ' '
			}
		}
	}
	var bodies [][2]token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Body != nil {
				bodies = append(bodies, [2]token.Pos{n.Body.Lbrace, n.Body.Rbrace})
			}
		case *ast.FuncLit:
			bodies = append(bodies, [2]token.Pos{n.Body.Lbrace, n.Body.Rbrace})
		case *ast.BasicLit:
			if n.Kind == token.STRING && strings.Contains(n.Value, "\n") {
				blankOut(n.Pos(), n.End())
			}
		}
		return true
	})
	inBody := func(p token.Pos) bool {
		for _, b := range bodies {
			if b[0] < p && p < b[1] {
				return true
			}
		}
		return false
	}
	for _, g := range f.Comments {
		if !inBody(g.Pos()) {
			blankOut(g.Pos(), g.End())
		}
	}
	var out []codeLine
	for i, l := range strings.Split(string(masked), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, codeLine{text: strings.Join(f, " "), line: i + 1})
		}
	}
	return out
}

// The scanner finds what it must and the matcher flags what it must: a check
// that found nothing would pass on any documentation.
func TestScannerAndMatcher(t *testing.T) {
	md := "# Title\n\n```sh\ngo test ./...\n```\n\n" +
		"- item\n\n  ```go\n  x := f()\n\n  _ = x\n  ```\n\n" +
		"```\noutput\n```\n\n````Go\ny := g()\n````\n\n```diff\n-a\n+b\n```\n"
	mdBlocks := markdownBlocks("README.md", []byte(md))
	if got, want := fmt.Sprint(mdBlocks), "[README.md:10 README.md:20]"; got != want {
		t.Fatalf("markdown blocks at %s, want %s", got, want)
	}
	if got := mdBlocks[0].lines; !slices.Equal(got, []string{"x := f()", "", "_ = x"}) {
		t.Errorf("indented block lines = %q", got)
	}

	const doc = "// Package p does things.\n//\n//\tfmt.Println(1)\n//\n//\tfmt.Println(2)\n//\n" +
		"// Prose.\n//\n//\tswitch {\n//\tdefault:\n//\t}\npackage p\n"
	const example = "package p_test\n\n// Example prose:\n//\n//\tfmt.Println(3)\n" +
		"func Example() {\n\t// fmt.Println(1)\n\tfmt.Println(1)\n\n\tfmt.Println(2)\n\ts := `\n\tfmt.Println(3)\n`\n\t_ = s\n}\n"
	fset := token.NewFileSet()
	df, err := parser.ParseFile(fset, "p/doc.go", doc, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docBlocks := docCommentBlocks(fset, df, "p/doc.go")
	if got, want := fmt.Sprint(docBlocks), "[p/doc.go:3 p/doc.go:9]"; got != want {
		t.Fatalf("doc.go blocks at %s, want %s", got, want)
	}
	ef, err := parser.ParseFile(fset, "p/example_test.go", example, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	code := []codeFile{
		{path: "p/doc.go", lines: codeLines(fset, df, []byte(doc))},
		{path: "p/example_test.go", lines: codeLines(fset, ef, []byte(example))},
	}
	for _, tt := range []struct {
		lines []string
		want  bool
	}{
		{[]string{"fmt.Println(1)", "", "  fmt.Println(2)"}, true}, // blank lines and indentation aside
		{[]string{"fmt.Println(2)", "fmt.Println(1)"}, false},      // order matters
		{[]string{"switch {", "default:", "}"}, false},             // only in doc.go's comment
		{[]string{"fmt.Println(3)"}, false},                        // only in a comment and a string
		{[]string{"// fmt.Println(1)"}, true},                      // a comment in a body is code
		{[]string{"// Example prose:"}, false},                     // one outside a body is not
	} {
		msg, ok := twin(block{file: "x.md", line: 1, kind: "```go block", lines: tt.lines}, code)
		if ok != tt.want {
			t.Errorf("twin(%q) = %v (%s), want %v", tt.lines, ok, msg, tt.want)
		}
	}
	msg, _ := twin(block{file: "x.md", line: 7, kind: "```go block", lines: []string{"fmt.Println(1)", "fmt.Println(9)"}}, code)
	for _, want := range []string{"x.md:7", "closest: p/example_test.go:8 matches its first 1 lines", `"fmt.Println(9)"`, "Example"} {
		if !strings.Contains(msg, want) {
			t.Errorf("report %q does not say %q", msg, want)
		}
	}
}
