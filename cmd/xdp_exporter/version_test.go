package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// gitHead is the checkout's commit.
func gitHead(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// versionOf builds the exporter with cmd (run in the module root) and
// returns what --version prints.
func versionOf(t *testing.T, bin string, cmd *exec.Cmd) string {
	t.Helper()
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	return string(out)
}

// TestVersion: a binary says what it is, built as make build builds it
// (the release of the VERSION file, the revision and branch git gives,
// the commit's date) and built with the plain
// toolchain, whose build information records the checkout (-buildvcs, on
// by default; this workplace's go env turns it off, the test on).
func TestVersion(t *testing.T) {
	head := gitHead(t)
	dir := t.TempDir()
	made := filepath.Join(dir, "made")
	release, err := os.ReadFile(filepath.Join("..", "..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	_, date := exportertest.Commit(t)
	out := versionOf(t, made, exec.Command("make", "-s", "build", "OUT="+made))
	for _, want := range []string{"xdp_exporter, version " + strings.TrimSpace(string(release)) + " ", "revision: " + head, "branch: ",
		"build date:       " + date} {
		if !strings.Contains(out, want) {
			t.Errorf("make build: --version lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "version  (") || strings.Contains(out, "build user:       \n") {
		t.Errorf("make build: --version has an empty field:\n%s", out)
	}

	plain := filepath.Join(dir, "plain")
	build := exec.Command("go", "build", "-o", plain, "./cmd/xdp_exporter")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "CGO_ENABLED=0")
	out = versionOf(t, plain, build)
	if !strings.Contains(out, "revision: "+head) || strings.Contains(out, "version  (") {
		t.Errorf("go build: --version names no version or not revision %s:\n%s", head, out)
	}

	// Without VCS data the build knows no branch, revision, user or
	// date: --version leaves them out instead of printing "branch: ,
	// revision: unknown" and empty lines.
	bare := filepath.Join(dir, "bare")
	build = exec.Command("go", "build", "-o", bare, "./cmd/xdp_exporter")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	out = versionOf(t, bare, build)
	for _, bad := range []string{"unknown", "branch: ,", "revision:", "build user:", "build date:"} {
		if strings.Contains(out, bad) {
			t.Errorf("go build -buildvcs=false: --version says %q:\n%s", bad, out)
		}
	}
	if !strings.HasPrefix(out, "xdp_exporter, version (devel)") || !strings.Contains(out, "go version:") {
		t.Errorf("go build -buildvcs=false: --version lacks what the toolchain knows:\n%s", out)
	}
}
