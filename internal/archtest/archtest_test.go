// Package archtest holds the layering of docs/dev/architecture.md to the tree:
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
	"slices"
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
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
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

// frameworkFiles are the files of collector/ that belong to no one
// collector: registration and flags, the scrape, the catalogue, the
// filters, the link snapshot, and the helpers the BPF collectors share.
var frameworkFiles = []string{"collector.go", "scrape.go", "metric.go", "filter.go", "links.go", "permission.go", "tracepoints.go"}

// frameworkLimit bounds the framework: node_exporter's collector.go is
// about 250 lines; ours adds single-flight scrapes until the latest
// deadline, filters applied before series are built, one link dump per
// scrape and the catalogue METRICS.md is rendered from, with each family's
// stability level and METRICS.md's explanation beside its HELP (1.0's
// interface, about 40 lines, hence 1,200 from 1,100), and
// --collector.NAME.metrics-exclude-extra, which adds to a long default
// exclude without repeating it (about 20 lines, hence 1,230). Growing past
// it is a reason to simplify, not to move code out of collector/.
const frameworkLimit = 1230

// TestCollectorSize holds collector/ to small files, each collector's
// own or the framework's, and the framework to frameworkLimit lines.
// Collectors may be as many as there are sources: their total is not
// capped, so a new one never pushes code out of the collector.
func TestCollectorSize(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(root, "collector", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	framework, seen := 0, 0
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(b), "\n")
		if n > 400 {
			t.Errorf("%s: %d lines, more than 400", p, n)
		}
		if slices.Contains(frameworkFiles, filepath.Base(p)) {
			framework += n
			seen++
		}
	}
	if seen != len(frameworkFiles) {
		t.Errorf("%d of the framework files %v exist: a renamed file must be renamed here", seen, frameworkFiles)
	}
	if framework > frameworkLimit {
		t.Errorf("the framework (%s) has %d lines, more than %d", strings.Join(frameworkFiles, ", "), framework, frameworkLimit)
	}
	t.Logf("collector/ framework: %d lines", framework)
}
