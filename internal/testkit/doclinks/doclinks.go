// Package doclinks checks the local links of Markdown files with
// markdown-link-check (npm, pinned in js/package-lock.json; make deps
// installs it), offline: a link to a file that does not exist, or to an
// anchor that is not a heading of the same file, fails. Links to other
// files' anchors are resolved by the documentation test itself, since
// markdown-link-check checks only a file's own anchors.
package doclinks

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

func jsDir() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "js")
}

// Check runs markdown-link-check on each file (paths relative to root)
// with every http(s) and mailto link ignored: the checker reaches no
// network. A relative link resolves from its own file's directory. The
// dead links, with their files, are one test error.
func Check(t *testing.T, root string, files []string) {
	t.Helper()
	bin := filepath.Join(jsDir(), "node_modules", ".bin", "markdown-link-check")
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Unavailable(t, "node not installed (apt-get install nodejs npm; make deps)")
		return
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "markdown-link-check not installed in %s (make deps runs npm ci there)", jsDir())
		return
	}
	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, []byte(`{"ignorePatterns": [{"pattern": "^(https?|mailto):"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--quiet", "--config", config}, files...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("markdown-link-check: %v\n%s", err, strings.TrimSpace(string(out)))
	}
}
