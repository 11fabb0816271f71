package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// TestNapiEndToEnd runs the binary with its defaults (napi is on), sends
// live frames into an XDP_DROP veth and checks through HTTP that the
// device's NAPI histogram counted every frame.
func TestNapiEndToEnd(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdict(t, pair, xdptest.Drop)
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the traffic generator")
	defer g.Close()

	e := startExporter(t, "--collector.napi")
	sent, err := g.Run(context.Background(), trafficgen.Config{
		NS: pair.NS, Ifindex: pair.Peer.Index,
		SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
		Count: 50_000, CPUs: []int{0, 1},
	})
	if err != nil {
		t.Fatal(err)
	}

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
