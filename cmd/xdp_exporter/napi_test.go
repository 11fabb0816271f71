package main

import (
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestNapiEndToEnd runs the binary with its defaults (napi is on), sends
// frames into an XDP_DROP veth and checks through HTTP that the
// device's NAPI histogram counted every frame.
func TestNapiEndToEnd(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdict(t, pair, xdptest.Drop)
	e := startExporter(t, "--collector.napi")
	const sent = 50_000
	vethtest.SendExactly(t, pair, sent)

	var work float64
	deadline := time.Now().Add(5 * time.Second)
	for {
		body := e.Scrape(t)
		work, _ = exportertest.Parse(t, body).Sum("xdp_napi_poll_work", "device", pair.Host.Name)
		if work >= float64(sent) || time.Now().After(deadline) {
			promtest.CheckMetrics(t, body)
			if !strings.Contains(body, `xdp_scrape_collector_success{collector="napi"} 1`) {
				t.Errorf("napi collector did not succeed; log:\n%s", e.Stderr)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if work != float64(sent) {
		t.Fatalf("xdp_napi_poll_work_sum for %s = %v over all contexts, want %d", pair.Host.Name, work, sent)
	}
}
