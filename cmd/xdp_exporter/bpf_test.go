package main

import (
	"strconv"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestBPFEnableStats runs the binary with --collector.bpf.enable-stats,
// sends a known number of frames to a device with an XDP program, and reads
// the program's run count from a scrape.
func TestBPFEnableStats(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	prog := vethtest.Verdict(t, "xdpe_stats", xdptest.Drop)
	vethtest.AttachProgram(t, pair.Host.Index, prog)
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()

	e := startExporter(t, "--collector.bpf.enable-stats")
	const n = 50_000
	vethtest.SendExactly(t, pair, n)

	body := e.Scrape(t)
	promtest.CheckMetrics(t, body)
	pid := strconv.FormatUint(uint64(id), 10)
	mfs := exportertest.Parse(t, body)
	mfs.Value(t, "xdp_bpf_prog_info", "device", pair.Host.Name, "attach_mode", "native", "prog_id", pid, "name", "xdpe_stats")
	if got := mfs.Value(t, "xdp_bpf_prog_runs_total", "prog_id", pid); got != n {
		t.Errorf("run count %v, want the %d frames sent", got, n)
	}
	if got := mfs.Value(t, "xdp_bpf_stats_enabled", "source", "exporter"); got != 1 {
		t.Errorf(`xdp_bpf_stats_enabled{source="exporter"} = %v, want 1`, got)
	}
	if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "bpf"); got != 1 {
		t.Errorf("bpf collector failed; log:\n%s", e.Stderr)
	}
}
