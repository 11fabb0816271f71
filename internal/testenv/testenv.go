// Package testenv decides what a test does when the host lacks a capability
// it needs: on a laptop it skips; in CI (XDP_EXPORTER_REQUIRE_PRIVILEGED=1,
// set by .ci/run) it fails, so a missing capability can never hide behind a
// skip.
package testenv

import (
	"errors"
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

// Privileged requires root-equivalent capabilities: CAP_NET_ADMIN to make
// namespaces and veth pairs, CAP_BPF/CAP_PERFMON to load and attach programs.
func Privileged(t testing.TB) {
	t.Helper()
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
