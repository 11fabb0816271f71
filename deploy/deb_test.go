package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// debianRoot makes a minimal Debian (trixie, with adduser, which the
// package depends on) with mmdebstrap in a temporary directory: a root the
// package can be installed into and purged from while the host stays as
// it is.
func debianRoot(t *testing.T) string {
	t.Helper()
	testenv.Privileged(t)
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		testenv.Unavailable(t, "mmdebstrap not installed (make deps)")
	}
	root := filepath.Join(t.TempDir(), "root")
	mirror := os.Getenv("XDP_EXPORTER_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	out, err := exec.Command("mmdebstrap", "--quiet", "--variant=minbase", "--include=adduser", "trixie", root, mirror).CombinedOutput()
	if err != nil {
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	return root
}

// inRoot runs a command in root with chroot and returns its output.
func inRoot(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := exec.Command("chroot", append([]string{root}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// snapshot is every path under root with its type, mode, owner and, for
// a regular file, its content's hash; what dpkg keeps of its own doings
// (its database and log, and the backups adduser's tools leave of the
// files they edit) is left out, as is /run, a tmpfs on a running system
// (where adduser leaves its lock).
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	own := []string{"var/lib/dpkg/", "var/log/", "var/cache/debconf/", "run/"}
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, p := range own {
			if strings.HasPrefix(rel+"/", p) {
				return nil
			}
		}
		if strings.HasPrefix(rel, "etc/") && strings.HasSuffix(rel, "-") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		state := info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			state += " " + hex.EncodeToString(sum[:])
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			state += " -> " + target
		}
		files[rel] = state
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// changes lists what differs between two snapshots.
func changes(before, after map[string]string) []string {
	var out []string
	for p, s := range after {
		if b, ok := before[p]; !ok {
			out = append(out, "added "+p)
		} else if b != s {
			out = append(out, "changed "+p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, "removed "+p)
		}
	}
	sort.Strings(out)
	return out
}

// checkDebian installs the release's amd64 package into a fresh Debian
// root with dpkg: the binary, the unit, the defaults as a conffile, the
// system user and the enabled unit are there, and the binary runs there
// as that user and answers a scrape; dpkg --purge then leaves the root as
// it was before the install.
func checkDebian(t *testing.T, deb string) {
	root := debianRoot(t)
	before := snapshot(t, root)
	if b, err := os.ReadFile(deb); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(root, "tmp", "p.deb"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dpkg -i:\n%s", inRoot(t, root, "dpkg", "-i", "/tmp/p.deb"))
	if err := os.Remove(filepath.Join(root, "tmp", "p.deb")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"usr/bin/prometheus-xdp-exporter", "usr/bin/xdp-top",
		"usr/lib/systemd/system/prometheus-xdp-exporter.service", "etc/default/prometheus-xdp-exporter",
		"etc/systemd/system/multi-user.target.wants/prometheus-xdp-exporter.service",
		"usr/share/prometheus-xdp-exporter/rules/alerts.yml", "usr/share/prometheus-xdp-exporter/dashboards/xdp-run-view.json",
		"usr/share/doc/prometheus-xdp-exporter/copyright"} {
		// Lstat: the unit's enabling link points into the root's /lib.
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("after dpkg -i: %v", err)
		}
	}
	if got := inRoot(t, root, "dpkg-query", "--control-show", "prometheus-xdp-exporter", "conffiles"); !strings.Contains(got, "/etc/default/prometheus-xdp-exporter") {
		t.Errorf("conffiles = %q, want /etc/default/prometheus-xdp-exporter", got)
	}
	if user := inRoot(t, root, "getent", "passwd", "xdp-exporter"); !strings.Contains(user, ":/nonexistent:/usr/sbin/nologin") {
		t.Errorf("the system user is %q, want one with no home and no shell", user)
	}
	unit := readFile(t, filepath.Join(root, "usr/lib/systemd/system/prometheus-xdp-exporter.service"))
	for _, line := range []string{"ExecStart=/usr/bin/prometheus-xdp-exporter --runtime.drop-capabilities $ARGS",
		"EnvironmentFile=-/etc/default/prometheus-xdp-exporter", "User=xdp-exporter", "Group=xdp-exporter"} {
		if !strings.Contains(unit, "\n"+line+"\n") {
			t.Errorf("the package's unit lacks %q:\n%s", line, unit)
		}
	}

	// The installed binary, as the service's user, in the root with a
	// /proc, unmounted again before the purge.
	proc := filepath.Join(root, "proc")
	if err := unix.Mount("proc", proc, "proc", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(proc, unix.MNT_DETACH) })
	var uid, gid uint32
	if _, err := fmt.Sscanf(inRoot(t, root, "id", "-u", "xdp-exporter")+inRoot(t, root, "id", "-g", "xdp-exporter"), "%d\n%d", &uid, &gid); err != nil {
		t.Fatal(err)
	}
	addr := exportertest.FreeAddr(t)
	cmd := exec.Command("/usr/bin/prometheus-xdp-exporter", "--web.listen-address="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	e := exportertest.Start(t, addr, cmd)
	version := strings.TrimSpace(readFile(t, "../VERSION"))
	if got := exportertest.Parse(t, e.Scrape(t)).Values("xdp_exporter_build_info", "version"); got[version] != 1 {
		t.Errorf("xdp_exporter_build_info by version = %v, want %s", got, version)
	}
	e.Stop(t)
	if err := unix.Unmount(proc, 0); err != nil {
		t.Fatal(err)
	}

	t.Logf("dpkg --purge:\n%s", inRoot(t, root, "dpkg", "--purge", "prometheus-xdp-exporter"))
	if left := changes(before, snapshot(t, root)); len(left) > 0 {
		t.Errorf("dpkg --purge left the root changed:\n%s", strings.Join(left, "\n"))
	}
}
