package flow

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	disableFor = regexp.MustCompile(`DisableFor:\s*\[\]client\.Object\{`)
	kindLit    = regexp.MustCompile(`&(?:\w+\.)?(\w+)\{\}`)
)

// scanRoot returns the module root of the working directory, "" when there
// is none or RACESAFE_VET_NO_SCAN is set. A driver that analyses a module
// from its root (cmd/racesafevet ./..., go vet ./...) starts there.
func scanRoot() string {
	if os.Getenv("RACESAFE_VET_NO_SCAN") != "" {
		return ""
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// scanDisableFor returns the kinds listed in client.CacheOptions.DisableFor
// in the module's Go files: where a manager is built is often another
// package than the reconciler that reads, and analysis facts flow only from
// a package to its importers, so the lists are read from source, once, at
// start.
func scanDisableFor(root string) []string {
	if root == "" {
		return nil
	}
	var kinds []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			switch d.Name() {
			case "vendor", "testdata", ".git", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil || !disableFor.Match(src) {
			return nil
		}
		for _, loc := range disableFor.FindAllIndex(src, -1) {
			end := closing(src, loc[1])
			for _, m := range kindLit.FindAllSubmatch(src[loc[1]:end], -1) {
				kinds = append(kinds, string(m[1]))
			}
		}
		return nil
	})
	return kinds
}

// closing returns the index of the brace that closes the literal opened
// just before from.
func closing(src []byte, from int) int {
	depth := 1
	for i := from; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(src)
}
