package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/uncore"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestUncoreRealBinary starts the exporter as a user enables the uncore
// collector. Where the kernel registered no uncore PMU (a VM), it is
// unsupported, not failed: success 1, unsupported 1, said once at INFO,
// no ERROR. Where it did, it counts.
func TestUncoreRealBinary(t *testing.T) {
	testenv.Privileged(t)
	_, probe := uncore.Discover("/sys")
	e := exportertest.Run(t, exportertest.FreeAddr(t), "--collector.disable-defaults", "--collector.uncore")
	body := e.Scrape(t)
	e.Stop(t)
	log := e.Stderr.String()
	if !strings.Contains(body, `xdp_scrape_collector_success{collector="uncore"} 1`) || strings.Contains(log, "level=ERROR") {
		t.Fatalf("uncore failed (probe: %v):\n%s\nlog:\n%s", probe, body, log)
	}
	want := `xdp_scrape_collector_unsupported{collector="uncore"} 0`
	if errors.Is(probe, uncore.ErrNoPMU) {
		want = `xdp_scrape_collector_unsupported{collector="uncore"} 1`
		if n := strings.Count(log, `msg="collector not supported on this host`); n != 1 || !strings.Contains(log, "no Intel uncore PMU") {
			t.Errorf("unsupported said %d times, want once with its reason:\n%s", n, log)
		}
	}
	if !strings.Contains(body, want) {
		t.Errorf("scrape lacks %s (probe: %v):\n%s", want, probe, body)
	}
}
