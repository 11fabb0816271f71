package main

import (
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestDropCapabilities starts the real binary as root with every default
// collector and --runtime.drop-capabilities, scrapes it, and checks that
// every thread is left with exactly the capabilities the enabled collectors
// declare for scrape time, with empty inheritable and ambient sets and a
// bounding set reduced to the same; a second instance with
// --no-runtime.drop-capabilities keeps root's capabilities, so the check
// can tell the two apart.
func TestDropCapabilities(t *testing.T) {
	testenv.Privileged(t)
	keep := defaultScrapeCaps()
	want := caps.State{Effective: keep, Permitted: keep, Bounding: keep}

	// An XDP program on a device gives the collectors that read programs
	// by id (bpf) something to do at scrape time, so a capability they
	// need but do not declare shows up as a failure.
	pair := vethtest.Pair(t, 1)
	vethtest.AttachProgram(t, pair.Host.Index, vethtest.Verdict(t, "xdpe_dropcaps", xdptest.Pass))
	vethtest.AttachTC(t, pair.Host.Index, "ingress", 1, vethtest.TCProgram(t, "xdpe_caps_tc"))

	e := startExporter(t, "--runtime.drop-capabilities")
	body := e.Scrape(t)
	promtest.CheckMetrics(t, body)
	if !strings.Contains(body, `name="xdpe_dropcaps"`) {
		t.Errorf("the scrape after the drop does not show the XDP program on %s:\n%s", pair.Host.Name, e.Stderr)
	}
	if !strings.Contains(body, `xdp_bpf_tc_prog_info{device="`+pair.Host.Name+`",hook="ingress",kind="tc",name="xdpe_caps_tc"`) {
		t.Errorf("the scrape after the drop does not show the tc program on %s:\n%s\n%s", pair.Host.Name, grepLines(body, "tc_prog"), e.Stderr)
	}
	// A collector that needs a capability at scrape time without declaring
	// it fails here.
	if err := exportertest.CheckScrape(body); err != nil {
		t.Fatalf("after dropping capabilities: %v\nlog:\n%s", err, e.Stderr)
	}
	for path, got := range e.ThreadCaps(t) {
		if got != want {
			t.Errorf("%s: %+v, want %+v", path, got, want)
		}
	}

	plain := startExporter(t, "--no-runtime.drop-capabilities")
	plain.Scrape(t)
	for path, got := range plain.ThreadCaps(t) {
		if got.Effective == keep {
			t.Errorf("%s: without the flag the exporter holds only %s; the test cannot tell dropping from not dropping", path, got.Effective)
		}
	}
}

// defaultScrapeCaps is the union of the capabilities the default
// collectors declare for scrape time: what the exporter keeps after the
// drop.
func defaultScrapeCaps() caps.Set {
	var keep caps.Set
	for _, r := range collector.Registrations() {
		if r.DefaultEnabled {
			keep |= caps.Of(r.ScrapeCapabilities...)
		}
	}
	return keep
}
