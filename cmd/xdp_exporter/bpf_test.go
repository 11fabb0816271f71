package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// sampleValue returns the value of the one sample of family name whose
// labels include every name=value pair given.
func sampleValue(t *testing.T, body, name string, labels ...string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	v, n := exportertest.Match(mfs, name, labels...)
	if n != 1 {
		t.Fatalf("%s{%s}: %d samples, want 1", name, strings.Join(labels, ","), n)
	}
	return v
}

// TestBPFEnableStats runs the binary with --collector.bpf.enable-stats,
// sends a known number of frames to a device with an XDP program, and reads
// the program's run count from a scrape.
func TestBPFEnableStats(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "xdpe_stats", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}, // XDP_DROP
	})
	testenv.Check(t, err, "loading an XDP_DROP program")
	defer prog.Close()
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: pair.Host.Index})
	testenv.Check(t, err, "attaching XDP")
	defer l.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()

	e := startExporter(t, "--collector.bpf.enable-stats")
	const n = 50_000
	vethtest.SendExactly(t, pair, n)

	body := e.Scrape(t)
	promtoolCheck(t, body)
	pid := strconv.FormatUint(uint64(id), 10)
	sampleValue(t, body, "xdp_bpf_prog_info", "device", pair.Host.Name, "mode", "native", "prog_id", pid, "name", "xdpe_stats")
	if got := sampleValue(t, body, "xdp_bpf_prog_runs_total", "prog_id", pid); got != n {
		t.Errorf("run count %v, want the %d frames sent", got, n)
	}
	if got := sampleValue(t, body, "xdp_bpf_stats_enabled", "source", "exporter"); got != 1 {
		t.Errorf(`xdp_bpf_stats_enabled{source="exporter"} = %v, want 1`, got)
	}
	if got := sampleValue(t, body, "xdp_scrape_collector_success", "collector", "bpf"); got != 1 {
		t.Errorf("bpf collector failed; log:\n%s", e.Stderr)
	}
}
