package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestCreatedTimestamps runs the real binary with the rxq collector on a
// veth and sends frames: scraped as OpenMetrics (the Accept header
// Prometheus sends), each queue x CPU series of the run-time-created
// counters carries a _created sample between the exporter's start and
// now; the classic text format has none.
func TestCreatedTimestamps(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	start := time.Now()
	e := exportertest.Run(t, exportertest.FreeAddr(t), "--collector.disable-defaults",
		"--collector.rxq", "--collector.rxq.device="+pair.Host.Name, "--collector.rxq.action=drop")
	vethtest.SendExactly(t, pair, 1000)
	get := func(accept string) string {
		req, err := http.NewRequest(http.MethodGet, "http://"+e.Addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	om := get("application/openmetrics-text; version=1.0.0")
	var created []string
	for _, line := range strings.Split(om, "\n") {
		if strings.HasPrefix(line, "xdp_rxq_packets_created{") {
			created = append(created, line)
		}
	}
	if len(created) != 2 { // one cell per queue, each on its own CPU
		t.Fatalf("%d xdp_rxq_packets_created samples, want 2:\n%s", len(created), om)
	}
	for _, line := range created {
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatal(err)
		}
		if at := time.Unix(0, int64(v*1e9)); at.Before(start.Add(-time.Second)) || at.After(time.Now()) {
			t.Errorf("%s: created at %v, not between the exporter's start %v and now", line, at, start)
		}
	}
	if text := get(""); strings.Contains(text, "_created") {
		t.Errorf("the classic text format has _created samples:\n%s", text)
	}
}
