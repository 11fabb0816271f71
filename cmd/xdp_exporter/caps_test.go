package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// threadCaps reads the capability sets of every thread of pid.
func threadCaps(t *testing.T, pid int) map[string]caps.State {
	t.Helper()
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no threads for pid %d: %v", pid, err)
	}
	out := map[string]caps.State{}
	for _, p := range paths {
		st, err := caps.ReadStatus(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = st
	}
	return out
}

// TestDropCapabilities starts the real binary as root with every default
// collector and --runtime.drop-capabilities, scrapes it, and checks that
// every thread is left with exactly the capabilities the enabled collectors
// declare for scrape time, with empty inheritable and ambient sets and a
// bounding set reduced to the same; a second instance without the flag
// keeps root's capabilities, so the check can tell the two apart.
func TestDropCapabilities(t *testing.T) {
	testenv.Privileged(t)
	var keep caps.Set
	for _, r := range collector.Registrations() {
		if r.DefaultEnabled {
			keep |= caps.Of(r.ScrapeCapabilities...)
		}
	}
	want := caps.State{Effective: keep, Permitted: keep, Bounding: keep}

	// An XDP program on a device gives the collectors that read programs
	// by id (bpf) something to do at scrape time, so a capability they
	// need but do not declare shows up as a failure.
	pair := vethtest.Pair(t, 1)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "xdpe_dropcaps",
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}, // XDP_PASS
	})
	testenv.Check(t, err, "loading an XDP program")
	defer prog.Close()
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: pair.Host.Index})
	testenv.Check(t, err, "attaching XDP to "+pair.Host.Name)
	defer l.Close()

	e := startExporter(t, "--runtime.drop-capabilities")
	body := e.Scrape(t)
	promtoolCheck(t, body)
	if !strings.Contains(body, `name="xdpe_dropcaps"`) {
		t.Errorf("the scrape after the drop does not show the XDP program on %s:\n%s", pair.Host.Name, e.Stderr)
	}
	// A collector that needs a capability at scrape time without declaring
	// it fails here.
	if err := checkScrape(body); err != nil {
		t.Fatalf("after dropping capabilities: %v\nlog:\n%s", err, e.Stderr)
	}
	for path, got := range threadCaps(t, e.Cmd.Process.Pid) {
		if got != want {
			t.Errorf("%s: %+v, want %+v", path, got, want)
		}
	}

	plain := startExporter(t)
	plain.Scrape(t)
	for path, got := range threadCaps(t, plain.Cmd.Process.Pid) {
		if got.Effective == keep {
			t.Errorf("%s: without the flag the exporter holds only %s; the test cannot tell dropping from not dropping", path, got.Effective)
		}
	}
}
