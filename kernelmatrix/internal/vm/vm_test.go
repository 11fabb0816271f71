package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// bookworm is Debian 12's kernel for a test that boots one guest, with a
// context that ends with the test (ten minutes at most).
func bookworm(t *testing.T) (context.Context, Kernel) {
	t.Helper()
	testenv.Privileged(t)
	if err := Available(); err != nil {
		testenv.Unavailable(t, "vm: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	k, err := Fetch(ctx, "bookworm", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, k
}

// TestPanicBootsOnceMore makes the guest's kernel panic on every boot
// (sysrq's crash): Run must see the panic, boot the guest a second time
// under the emulator, and fail with errPanic when it panics again.
func TestPanicBootsOnceMore(t *testing.T) {
	ctx, k := bookworm(t)
	var console strings.Builder
	err := Run(ctx, Config{Kernel: k, Script: "echo c > /proc/sysrq-trigger\n", Out: t.TempDir(), Console: &console})
	if !errors.Is(err, errPanic) {
		t.Fatalf("Run = %v, want a kernel panic\nguest console:\n%s", err, console.String())
	}
	if n := strings.Count(console.String(), upMarker); n != 2 {
		t.Errorf("the guest reached its init %d times, want 2 (one boot more after the panic)\nguest console:\n%s", n, console.String())
	}
}

// TestModulesOverHostDirectory boots a guest on a host that has a
// directory at the guest kernel's /lib/modules/VERSION, as a Debian 12
// host running the same 6.1 kernel the matrix fetches has: the guest must
// still find its own modules there (it autoloads veth), and the host's
// directory must be as it was.
func TestModulesOverHostDirectory(t *testing.T) {
	ctx, k := bookworm(t)
	hostDir := filepath.Join("/lib/modules", k.Version)
	// Made for the test where absent, and removed after it, innermost
	// first (t.Cleanup runs in reverse).
	for _, dir := range []string{filepath.Dir(hostDir), hostDir} {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(dir) })
		}
	}
	before, err := os.ReadDir(hostDir)
	if err != nil {
		t.Fatal(err)
	}
	var console strings.Builder
	script := "ip link add xvmod0 type veth peer name xvmod1\ntest -e /lib/modules/$(uname -r)/modules.dep\n"
	if err := Run(ctx, Config{Kernel: k, Script: script, Out: t.TempDir(), Console: &console}); err != nil {
		t.Fatalf("guest with the host's %s present: %v\nguest console:\n%s", hostDir, err, console.String())
	}
	after, err := os.ReadDir(hostDir)
	if err != nil || len(after) != len(before) {
		t.Errorf("the host's %s changed: %d entries before, %d after (%v)", hostDir, len(before), len(after), err)
	}
}
