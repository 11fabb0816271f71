package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestCompareNodeExporter runs Debian's prometheus-node-exporter (the peer
// users run today) and this exporter side by side, each with only its
// ethtool collector, over the same 100 veth interfaces; scrapes each 20
// times, alternating; reports both p50 scrape times and their ratio; and
// checks both report the same values for the veth counters.
//
// It is opt-in (about 10 s, and it needs the prometheus-node-exporter
// package): XDP_EXPORTER_COMPARE=1 go test ./cmd/xdp_exporter -run TestCompareNodeExporter -v
func TestCompareNodeExporter(t *testing.T) {
	if os.Getenv("XDP_EXPORTER_COMPARE") != "1" {
		t.Skip("opt-in comparison; set XDP_EXPORTER_COMPARE=1")
	}
	testenv.Privileged(t)
	nodeExporter, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		testenv.Unavailable(t, "prometheus-node-exporter not installed (apt-get install prometheus-node-exporter)")
		return
	}

	prefix := manyVeths(t, "xn", 50, 1)
	include := prefix + ".*"

	args := []string{"--collector.nic.device-include=" + include, "--collector.nic.metrics-exclude="}
	for _, r := range collector.Registrations() {
		if r.Name != "nic" {
			args = append(args, "--no-collector."+r.Name)
		}
	}
	ours := startExporter(t, args...)

	theirsURL := startNodeExporter(t, nodeExporter, include)
	oursURL := "http://" + ours.Addr + "/metrics"

	scrape := func(url string) (time.Duration, string) {
		start := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return time.Since(start), string(body)
	}
	// One warm-up each: ours reads string sets once, then caches them.
	_, oursBody := scrape(oursURL)
	_, theirsBody := scrape(theirsURL)

	var dOurs, dTheirs []time.Duration
	for range 20 {
		d, _ := scrape(theirsURL)
		dTheirs = append(dTheirs, d)
		d, _ = scrape(oursURL)
		dOurs = append(dOurs, d)
	}
	p50 := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	po, pt := p50(dOurs), p50(dTheirs)
	t.Logf("100 veth interfaces, 20 scrapes each, alternating: node_exporter %s p50 %v, xdp_exporter p50 %v, ratio %.1fx",
		nodeExporterVersion(nodeExporter), pt, po, float64(pt)/float64(po))
	t.Logf("collector's own time in the last scrape: node_exporter %s s, xdp_exporter %s s",
		sampleText(t, theirsBody, "node_scrape_collector_duration_seconds", `collector="ethtool"`),
		sampleText(t, oursBody, "xdp_scrape_collector_duration_seconds", `collector="nic"`))

	// Same counters, same values. Taken from the warm-up scrapes: nothing
	// sends on these veths, so the values cannot move in between.
	checked := compareValues(t, prefix, 50, theirsBody, oursBody)
	t.Logf("%d values compared, all equal", checked)
}

// startNodeExporter runs node_exporter with only its ethtool collector on
// the devices include matches, until the test ends, and returns its
// metrics URL.
func startNodeExporter(t testing.TB, bin, include string) string {
	t.Helper()
	addr := exportertest.FreeAddr(t)
	cmd := exec.Command(bin, "--web.listen-address="+addr,
		"--collector.disable-defaults", "--collector.ethtool",
		"--collector.ethtool.device-include="+include)
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // node_exporter exits 1 on SIGINT
	url := "http://" + addr + "/metrics"
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter did not start:\n%s", log.String())
		}
	}
}

// compareValues checks that both exporters report the same veth counters
// of the n pairs, and returns how many values it compared.
func compareValues(t *testing.T, prefix string, n int, theirsBody, oursBody string) int {
	t.Helper()
	checked := 0
	for i := range n {
		for _, dev := range []string{fmt.Sprintf("%s%da", prefix, i), fmt.Sprintf("%s%db", prefix, i)} {
			lbl := fmt.Sprintf(`device=%q`, dev)
			for _, pair := range [][2]string{
				{"node_ethtool_peer_ifindex", "xdp_nic_stat_peer_ifindex"},
				{"node_ethtool_received_queue_0_xdp_drops", "xdp_nic_rx_xdp_packets_total"},
				{"node_ethtool_received_queue_0_drops", "xdp_nic_queue_stat_rx_drops"},
				{"node_ethtool_transmitted_queue_0_xdp_xmit", "xdp_nic_xdp_xmit_packets_total"},
			} {
				ourLbl := lbl
				if !strings.Contains(pair[1], "stat_peer") {
					ourLbl += `,queue="0"`
					if strings.Contains(pair[1], "rx_xdp_packets") {
						ourLbl += `,action="drop"`
					}
				}
				want := sampleText(t, theirsBody, pair[0], lbl)
				if got := sampleText(t, oursBody, pair[1], ourLbl); got != want {
					t.Errorf("%s{%s}: node_exporter %s = %s, ours %s = %s", dev, lbl, pair[0], want, pair[1], got)
				}
				checked++
			}
		}
	}
	return checked
}

func nodeExporterVersion(bin string) string {
	out, _ := exec.Command(bin, "--version").CombinedOutput()
	return strings.Fields(string(out) + " ? ? ?")[2]
}

// sampleText is the value of the one sample of family whose labels
// include every comma-separated name="value" in labels, as text.
func sampleText(t *testing.T, body, family, labels string) string {
	t.Helper()
	var pairs []string
	for _, kv := range strings.Split(labels, ",") {
		k, v, _ := strings.Cut(kv, "=")
		unquoted, err := strconv.Unquote(v)
		if err != nil {
			t.Fatalf("label %s: %v", kv, err)
		}
		pairs = append(pairs, k, unquoted)
	}
	return fmt.Sprint(exportertest.Parse(t, body).Value(t, family, pairs...))
}
