package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// TestEthtoolBadRegexp checks that each ethtool regexp flag rejects a bad
// expression at start-up with one clear line and a non-zero exit.
func TestEthtoolBadRegexp(t *testing.T) {
	for _, flag := range []string{"device-include", "device-exclude", "metrics-include"} {
		t.Run(flag, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, exportertest.Build(t), "--collector.nic."+flag+"=(").CombinedOutput()
			if err == nil {
				t.Fatal("exporter accepted a bad regexp")
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "missing closing )") {
				t.Fatalf("want one line naming the regexp error, got:\n%s", out)
			}
		})
	}
}
