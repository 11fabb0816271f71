package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContributingLayout fails when a directory with Go code is in no row
// of CONTRIBUTING.md's layout table, itself or through a parent row.
func TestContributingLayout(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "## Layout")
	if !ok {
		t.Fatal("CONTRIBUTING.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	listed := func(dir string) bool {
		for d := dir; d != "."; d = filepath.Dir(d) {
			if strings.Contains(layout, "`"+d+"/`") {
				return true
			}
		}
		return false
	}
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		if dir != "." && !listed(dir) {
			t.Errorf("%s/ holds Go code and no row of CONTRIBUTING.md's layout table names it", dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
