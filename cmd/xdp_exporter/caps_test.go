package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/caps"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
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

	e := startExporter(t, "--runtime.drop-capabilities")
	body := e.Scrape(t)
	promtoolCheck(t, body)
	// A collector that needs a capability at scrape time without declaring
	// it fails here.
	if err := checkScrape(body); err != nil {
		t.Fatalf("after dropping capabilities: %v\nlog:\n%s", err, e.stderr)
	}
	for path, got := range threadCaps(t, e.cmd.Process.Pid) {
		if got != want {
			t.Errorf("%s: %+v, want %+v", path, got, want)
		}
	}

	plain := startExporter(t)
	plain.Scrape(t)
	for path, got := range threadCaps(t, plain.cmd.Process.Pid) {
		if got.Effective == keep {
			t.Errorf("%s: without the flag the exporter holds only %s; the test cannot tell dropping from not dropping", path, got.Effective)
		}
	}
}
