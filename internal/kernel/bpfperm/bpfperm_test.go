package bpfperm

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

func TestParseLockdown(t *testing.T) {
	for in, want := range map[string]string{
		"[none] integrity confidentiality\n": "none",
		"none [integrity] confidentiality\n": "integrity",
		"none integrity [confidentiality]":   "confidentiality",
		"":                                   "",
	} {
		if got := parseLockdown([]byte(in)); got != want {
			t.Errorf("parseLockdown(%q) = %q, want %q", in, got, want)
		}
	}
}

const childEnv = "XDP_EXPORTER_BPFPERM_CHILD"

// TestCausesWithoutCapabilities runs Causes as nobody, who holds no
// capability: every kind of command names what is missing. As root,
// holding every capability, none is named.
func TestCausesWithoutCapabilities(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		os.Stdout.WriteString("bpf: " + strings.Join(Causes(BPF), "; ") + "\nadmin: " + strings.Join(Causes(Admin), "; ") + "\nnetadmin: " + strings.Join(Causes(NetAdmin), "; ") + "\n")
		return
	}
	testenv.Privileged(t)
	for _, c := range slices.Concat(Causes(BPF), Causes(Admin), Causes(NetAdmin)) {
		if strings.Contains(c, "missing CAP") {
			t.Errorf("root: %s", c)
		}
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testenv.Unavailable(t, "setpriv (util-linux) not installed")
		return
	}
	// A copy nobody can run: go test's own directory is root's.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bpfperm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bpfperm.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestCausesWithoutCapabilities$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{"bpf: missing CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)", "admin: missing CAP_SYS_ADMIN", "netadmin: missing CAP_NET_ADMIN"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}
