// Package testenv decides what a test does when the host lacks a capability
// it needs: on a laptop it skips; in CI (XDP_EXPORTER_REQUIRE_PRIVILEGED=1,
// set by .ci/run) it fails, so a missing capability can never hide behind a
// skip.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// RequireEnv is the variable .ci/run sets.
const RequireEnv = "XDP_EXPORTER_REQUIRE_PRIVILEGED"

// Required reports whether missing capabilities must fail tests.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable skips the test, or fails it when capabilities are required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("required capability missing ("+RequireEnv+"=1): "+format, args...)
	}
	t.Skipf(format, args...)
}

// UnprivilegedEnv set to 1 skips every test that needs root, even where
// the tests run as root: make check, the part of the suite that needs
// neither root nor QEMU, for a contributor's first minute.
const UnprivilegedEnv = "XDP_EXPORTER_UNPRIVILEGED"

// Privileged requires root-equivalent capabilities: CAP_NET_ADMIN to make
// namespaces and veth pairs, CAP_BPF/CAP_PERFMON to load and attach programs.
func Privileged(t testing.TB) {
	t.Helper()
	if os.Getenv(UnprivilegedEnv) == "1" {
		if Required() {
			t.Fatalf("%s=1 and %s=1 contradict each other", UnprivilegedEnv, RequireEnv)
		}
		t.Skipf("needs root; %s=1 (make check) runs only what does not", UnprivilegedEnv)
	}
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root (CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON)")
		return
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		Unavailable(t, "cannot lift RLIMIT_MEMLOCK for BPF: %v", err)
	}
}

// Check turns an error that means "this host cannot do that" (EPERM,
// ENOTSUP, ENOSYS) into Unavailable and any other error into a failure.
func Check(t testing.TB, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		Unavailable(t, "%s: %v", what, err)
		return
	}
	t.Fatalf("%s: %v", what, err)
}

// KernelBefore reports whether the running kernel is older than
// major.minor: a test of a feature that kernel predates checks what the
// exporter says there (unsupported) instead of the feature itself. On a
// newer kernel the feature must work, so an "unsupported" there fails.
func KernelBefore(t testing.TB, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var maj, mnr int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &mnr); err != nil {
		t.Fatalf("parsing the kernel release: %v", err)
	}
	return maj < major || maj == major && mnr < minor
}

// RecordEnv set to 1 makes the tests that compare with a recording (the
// replies constructed as a kernel sends them, a scrape of the whole-host
// fixture, the XY charts' transformed frames, what the kernel matrix
// measured) rewrite it instead: make generate RECORD=1. Set to capture it
// also records the replies of the running kernel, whose values the
// readers' tests then state anew: make generate RECORD=capture. Without it
// every test only compares.
const RecordEnv = "XDP_EXPORTER_RECORD"

// Recording reports whether RecordEnv asks for recordings to be written.
func Recording() bool { return os.Getenv(RecordEnv) == "1" || Capturing() }

// Capturing reports whether RecordEnv asks for the running kernel's
// replies to be recorded too.
func Capturing() bool { return os.Getenv(RecordEnv) == "capture" }
