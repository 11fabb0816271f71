package main

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestJoinedScrapesRealBinary runs the real exporter with its default
// collectors and sends 100 pairs of scrapes at the same moment, as an HA
// pair of Prometheus servers does: one announcing a 4 ms timeout
// (X-Prometheus-Scrape-Timeout-Seconds: 0.004), the other none (the
// exporter's default). The short ones may time out; no default one may
// report a failed collector, which the shared Update's deadline used to
// cause (2 to 4 in 100).
func TestJoinedScrapesRealBinary(t *testing.T) {
	testenv.Privileged(t)
	e := exportertest.Run(t, exportertest.FreeAddr(t))
	get := func(timeout string) (string, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+e.Addr+"/metrics", nil)
		if err != nil {
			return "", err
		}
		if timeout != "" {
			req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", timeout)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	failed := 0
	for i := range 100 {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = get("0.004")
		}()
		body, err := get("")
		wg.Wait()
		if err != nil {
			t.Fatalf("pair %d: default scrape: %v", i, err)
		}
		mfs := exportertest.Parse(t, body)
		var bad []string
		for _, m := range mfs["xdp_scrape_collector_success"].GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				bad = append(bad, m.GetLabel()[0].GetValue())
			}
		}
		if len(bad) > 0 {
			failed++
			t.Logf("pair %d: the default scrape reports %v failed", i, bad)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if failed > 0 {
		t.Errorf("%d of 100 default scrapes reported a failed collector beside a 4 ms one; log:\n%s", failed, e.Stderr)
	}
}
