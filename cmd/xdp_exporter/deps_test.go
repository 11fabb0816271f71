package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinariesLinkNoTestCode lists what the shipped binaries link: neither
// may carry the testing package or the test helpers, and the exporter
// must not carry the lab's traffic generator and its BPF program.
func TestBinariesLinkNoTestCode(t *testing.T) {
	const mod = "github.com/xdp-exporter/xdp_exporter/"
	for pkg, banned := range map[string][]string{
		mod + "cmd/xdp_exporter": {"testing", mod + "internal/testenv", mod + "internal/vethtest", mod + "internal/trafficgen", mod + "internal/vethns"},
		mod + "cmd/xdp-lab":      {"testing", mod + "internal/testenv", mod + "internal/vethtest"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, b := range banned {
			if slices.Contains(deps, b) {
				t.Errorf("%s links %s", pkg, b)
			}
		}
	}
}
