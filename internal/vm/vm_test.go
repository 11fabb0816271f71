package vm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// TestPanicBootsOnceMore makes the guest's kernel panic on every boot
// (sysrq's crash): Run must see the panic, boot the guest a second time
// under the emulator, and fail with errPanic when it panics again.
func TestPanicBootsOnceMore(t *testing.T) {
	testenv.Privileged(t)
	if err := Available(); err != nil {
		testenv.Unavailable(t, "vm: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k, err := Fetch(ctx, "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	var console strings.Builder
	err = Run(ctx, Config{Kernel: k, Script: "echo c > /proc/sysrq-trigger\n", Out: t.TempDir(), Console: &console})
	if !errors.Is(err, errPanic) {
		t.Fatalf("Run = %v, want a kernel panic\nguest console:\n%s", err, console.String())
	}
	if n := strings.Count(console.String(), upMarker); n != 2 {
		t.Errorf("the guest reached its init %d times, want 2 (one boot more after the panic)\nguest console:\n%s", n, console.String())
	}
}
