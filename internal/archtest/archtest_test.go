// Package archtest holds the layering of docs/architecture.md to the tree:
// what may import what, the size of collector/, and the length of
// functions.
package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

// declarativeTables are functions that are one table each (a dashboard's
// panels, the alerting rules): their length is their content.
var declarativeTables = map[string]bool{
	"dashboards/run.go:runBoard":        true,
	"dashboards/fleet.go:fleetBoard":    true,
	"dashboards/paper.go:paperBoard":    true,
	"dashboards/rules.go:AlertingRules": true,
}

// TestFunctionLength holds every function of the project, tests included,
// to 80 lines, declarative tables aside.
func TestFunctionLength(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_bpfel.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.Body.Rbrace).Line - fset.Position(fn.Pos()).Line + 1
			if lines > 80 && !declarativeTables[rel+":"+fn.Name.Name] {
				t.Errorf("%s:%d: %s is %d lines, more than 80", rel, fset.Position(fn.Pos()).Line, fn.Name.Name, lines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollectorSize holds collector/ to the framework and one small file
// per collector: under 4,500 lines of non-test code, no file over 400.
func TestCollectorSize(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(root, "collector", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(b), "\n")
		total += n
		if n > 400 {
			t.Errorf("%s: %d lines, more than 400", p, n)
		}
	}
	if total >= 4500 {
		t.Errorf("collector/ has %d lines of non-test code, want under 4,500", total)
	}
	t.Logf("collector/: %d lines of non-test code", total)
}
