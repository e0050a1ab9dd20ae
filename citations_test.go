package mcpswarm

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citedTest matches a test, benchmark or fuzz target named in prose.
var citedTest = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\b`)

// TestCitedTestsExist pins that every test named in a Go comment or in the
// docs exists: a comment saying "Test<Name> pins this" is a promise a reader
// relies on, and a renamed or never-written test silently breaks it.
// (A placeholder such as Test<Name> in prose is not matched.)
func TestCitedTestsExist(t *testing.T) {
	fset := token.NewFileSet()
	defined := map[string]bool{"TestMain": true}
	type citation struct{ where, name string }
	var cited []citation
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", ".git", ".cache", "testdata", "results":
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go"):
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
					defined[fn.Name.Name] = true
				}
			}
			for _, cg := range f.Comments {
				for _, m := range citedTest.FindAllString(cg.Text(), -1) {
					cited = append(cited, citation{fset.Position(cg.Pos()).String(), m})
				}
			}
		case strings.HasSuffix(path, ".md"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range citedTest.FindAllString(string(b), -1) {
				cited = append(cited, citation{path, m})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cited {
		if !defined[c.name] {
			t.Errorf("%s cites %s, which no Go file defines", c.where, c.name)
		}
	}
}
