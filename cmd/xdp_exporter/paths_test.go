package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// TestPathFlags runs the exporter on another procfs and sysfs, as in a
// container that mounts the host's under /host: the cpu collector reads
// the 2-CPU fixture's /proc, the bpf collector its sysctl, and the pcie
// collector, finding no PCI bus under the given sysfs, says it is
// unsupported there.
func TestPathFlags(t *testing.T) {
	proc, err := filepath.Abs(filepath.Join("..", "..", "collector", "testdata", "proc", "2cpu"))
	if err != nil {
		t.Fatal(err)
	}
	sys := t.TempDir()
	addr := exportertest.FreeAddr(t)
	e := exportertest.Run(t, addr, "--collector.disable-defaults", "--collector.cpu", "--collector.pcie",
		"--path.procfs="+proc, "--path.sysfs="+sys)
	if n := e.Sum(t, "xdp_scrape_collector_success", "collector", "cpu"); n != 1 {
		t.Fatalf("cpu collector on %s: success %v\n%s", proc, n, e.Stderr)
	}
	body := e.Scrape(t)
	if got := strings.Count(body, `xdp_cpu_seconds_total{cpu="`); got != 2*len(strings.Split(collector.DefaultCPUModes, "|")) {
		t.Errorf("%d cpu seconds series from the 2-CPU procfs, want 2 x the default modes %s", got, collector.DefaultCPUModes)
	}
	if !strings.Contains(body, `xdp_scrape_collector_unsupported{collector="pcie"} 1`) ||
		!strings.Contains(e.Stderr.String(), "no PCI bus in sysfs ("+sys+"/bus/pci: ") {
		t.Errorf("pcie under an empty sysfs is not reported unsupported:\n%s", e.Stderr)
	}
}
