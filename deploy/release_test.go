package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// release runs scripts/release into dir and returns what it wrote.
func release(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("scripts/release")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "DIST="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestRelease builds the release twice from this commit: the same
// archives and Debian packages with the same sums (sha256sum -c passes),
// each archive holding the three binaries, the licences, NOTICE, the
// dashboards and rules and the Alertmanager configuration; the amd64
// binary, and the arm64 one under qemu-user, say the VERSION file's
// release with the revision and the commit's date. The amd64 package is
// installed and purged in a Debian root of its own (checkDebian).
func TestRelease(t *testing.T) {
	version := strings.TrimSpace(readFile(t, "../VERSION"))
	if !strings.Contains(readFile(t, "../CHANGELOG.md"), "\n## ["+version+"] - ") {
		t.Errorf("CHANGELOG.md has no section for VERSION %s (## [%s] - DATE)", version, version)
	}
	first, second := t.TempDir(), t.TempDir()
	names := release(t, first)
	deb := func(arch string) string { return "prometheus-xdp-exporter_" + version + "_" + arch + ".deb" }
	want := []string{deb("amd64"), deb("arm64"), "sha256sums.txt",
		"xdp_exporter-" + version + ".linux-amd64.tar.gz", "xdp_exporter-" + version + ".linux-arm64.tar.gz"}
	if !slices.Equal(names, want) {
		t.Fatalf("dist holds %v, want %v", names, want)
	}
	release(t, second)
	sums := readFile(t, filepath.Join(first, "sha256sums.txt"))
	if again := readFile(t, filepath.Join(second, "sha256sums.txt")); again != sums {
		t.Errorf("two runs from one commit differ:\n%s\n%s", sums, again)
	}
	check := exec.Command("sha256sum", "-c", "sha256sums.txt")
	check.Dir = first
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
	t.Logf("sha256sums.txt:\n%s", sums)

	head, date := exportertest.Commit(t)
	for _, arch := range []string{"amd64", "arm64"} {
		name := "xdp_exporter-" + version + ".linux-" + arch
		out, err := exec.Command("tar", "-xzf", filepath.Join(first, name+".tar.gz"), "-C", first).CombinedOutput()
		if err != nil {
			t.Fatalf("tar: %v\n%s", err, out)
		}
		for _, f := range []string{"xdp_exporter", "xdp-top", "xdp-lab", "LICENSE", "LICENSES/GPL-2.0-only.txt", "NOTICE", "README.md",
			"CHANGELOG.md", "dashboards/xdp-run-view.json", "dashboards/rules/alerts.yml", "dashboards/rules/recording.yml",
			"alertmanager/alertmanager.yml", "alertmanager/xdp.tmpl"} {
			if _, err := os.Stat(filepath.Join(first, name, f)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		bin := filepath.Join(first, name, "xdp_exporter")
		run := exec.Command(bin, "--version")
		if arch == "arm64" {
			qemu, err := exec.LookPath("qemu-aarch64")
			if err != nil {
				testenv.Unavailable(t, "qemu-aarch64 not installed (apt-get install qemu-user)")
				continue
			}
			run = exec.Command(qemu, bin, "--version")
		}
		v, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", name, err, v)
		}
		for _, w := range []string{"xdp_exporter, version " + version + " ", "revision: " + head,
			"build date:       " + date, "platform:         linux/" + arch} {
			if !strings.Contains(string(v), w) {
				t.Errorf("%s --version lacks %q:\n%s", name, w, v)
			}
		}
		t.Logf("%s:\n%s", name, v)
		field, err := exec.Command("dpkg-deb", "--field", filepath.Join(first, deb(arch)), "Package", "Version", "Architecture").CombinedOutput()
		if w := "Package: prometheus-xdp-exporter\nVersion: " + version + "\nArchitecture: " + arch + "\n"; err != nil || string(field) != w {
			t.Errorf("%s's control: %v\n%s, want\n%s", deb(arch), err, field, w)
		}
	}
	t.Run("dpkg", func(t *testing.T) { checkDebian(t, filepath.Join(first, deb("amd64"))) })
}
