package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/stat"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/vethns"
)

// scrapeVariant is one exporter process the benchmark scrapes.
type scrapeVariant struct {
	name  string
	url   string
	times []time.Duration
	body  string
}

// BenchmarkScrapeManyInterfaces scrapes, over HTTP as Prometheus does
// (gzip offered), exporters running side by side on 100 veth interfaces
// (50 pairs, 4 queues each):
//
//   - default: this exporter with its default collectors;
//   - ethtool: this exporter with only the ethtool collector;
//   - ethtool-control: a second, identical ethtool-only instance, the noise
//     control (its ratio to ethtool must be within a few percent);
//   - node_exporter: Debian's prometheus-node-exporter with only its ethtool
//     collector, on the same interfaces (skipped when not installed);
//   - baseline-default: with XDP_EXPORTER_BASELINE=/path/to/xdp_exporter,
//     another build (an earlier commit) with its default collectors.
//
// Each round scrapes every variant once, in an order rotated every round,
// with the same 20 ms pause after each scrape. It reports each variant's
// p50 and the median per-round ratios to ethtool (and of default to
// baseline-default). Run:
//
//	go test ./cmd/xdp_exporter -run '^$' -bench ScrapeManyInterfaces -benchtime 30x
func BenchmarkScrapeManyInterfaces(b *testing.B) {
	include := manyVeths(b) + ".*"
	ethtoolOnly := []string{"--collector.disable-defaults", "--collector.ethtool",
		"--collector.ethtool.device-include=" + include}
	var variants []*scrapeVariant
	add := func(name, addr string) {
		variants = append(variants, &scrapeVariant{name: name, url: "http://" + addr + "/metrics"})
	}
	add("default", startExporter(b).Addr)
	add("ethtool", startExporter(b, ethtoolOnly...).Addr)
	add("ethtool-control", startExporter(b, ethtoolOnly...).Addr)
	if bin := os.Getenv("XDP_EXPORTER_BASELINE"); bin != "" {
		addr := exportertest.FreeAddr(b)
		exportertest.Start(b, addr, exec.Command(bin, "--web.listen-address="+addr))
		add("baseline-default", addr)
	}
	if bin, err := exec.LookPath("prometheus-node-exporter"); err == nil {
		addr := exportertest.FreeAddr(b)
		cmd := exec.Command(bin, "--web.listen-address="+addr,
			"--collector.disable-defaults", "--collector.ethtool", "--collector.ethtool.device-include="+include)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // node_exporter exits 1 on SIGINT
		waitHTTP(b, "http://"+addr+"/")
		add("node_exporter", addr)
	} else {
		b.Log("prometheus-node-exporter not installed: no comparison with it")
	}

	scrape := func(v *scrapeVariant) {
		start := time.Now()
		resp, err := http.Get(v.url)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: HTTP %d, %v", v.name, resp.StatusCode, err)
		}
		v.times = append(v.times, time.Since(start))
		v.body = string(body)
	}
	for _, v := range variants { // warm-up: string sets, BTF, connections
		scrape(v)
		v.times = nil
	}
	b.ResetTimer()
	for round := range b.N {
		for i := range variants {
			scrape(variants[(round+i)%len(variants)])
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.StopTimer()

	if n := strings.Count(variants[0].body, "\n"); !strings.Contains(variants[0].body, `xdp_ethtool_driver_info{`) {
		b.Fatalf("the default scrape (%d lines) has no ethtool series", n)
	}
	for _, line := range strings.Split(variants[0].body, "\n") {
		if strings.HasPrefix(line, "xdp_scrape_collector_success{") && strings.HasSuffix(line, " 0") {
			b.Errorf("default set: %s", line)
		}
	}
	p50 := map[string]time.Duration{}
	for _, v := range variants {
		ts := slices.Sorted(slices.Values(v.times))
		p50[v.name] = ts[len(ts)/2]
		series := 0
		for _, line := range strings.Split(v.body, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				series++
			}
		}
		b.ReportMetric(float64(p50[v.name].Microseconds())/1000, v.name+"-p50-ms")
		b.Logf("%-16s p50 %7.2f ms over %d scrapes, %d samples", v.name, float64(p50[v.name].Microseconds())/1000, len(ts), series)
	}
	// Ratios are medians of per-round ratios: both scrapes of a round
	// saw the same machine, so slow drifts of its load cancel.
	byName := map[string]*scrapeVariant{}
	for _, v := range variants {
		byName[v.name] = v
	}
	ratio := func(num, den string) (float64, bool) {
		a, b := byName[num], byName[den]
		if a == nil || b == nil {
			return 0, false
		}
		rs := make([]float64, len(a.times))
		for i := range rs {
			rs[i] = a.times[i].Seconds() / b.times[i].Seconds()
		}
		return stat.Median(rs), true
	}
	for _, r := range [][2]string{{"ethtool-control", "ethtool"}, {"node_exporter", "ethtool"}, {"default", "baseline-default"}} {
		if v, ok := ratio(r[0], r[1]); ok {
			b.ReportMetric(v, r[0]+"/"+r[1])
		}
	}
}

// waitHTTP polls url until it answers, for 20 s at most.
func waitHTTP(tb testing.TB, url string) {
	tb.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not answer: %v", url, err)
		}
	}
}

// manyVeths makes 50 veth pairs with 4 queues each, removed when the
// benchmark ends, and returns the prefix of their names.
func manyVeths(b *testing.B) string {
	testenv.Privileged(b)
	prefix := "xb" + vethns.UniqueID()[:6]
	for i := range 50 {
		a, p := fmt.Sprintf("%s%da", prefix, i), fmt.Sprintf("%s%db", prefix, i)
		err := netlink.LinkAdd(&netlink.Veth{
			LinkAttrs: netlink.LinkAttrs{Name: a, NumTxQueues: 4, NumRxQueues: 4},
			PeerName:  p, PeerNumTxQueues: 4, PeerNumRxQueues: 4,
		})
		testenv.Check(b, err, "creating veth "+a)
		b.Cleanup(func() {
			if l, err := netlink.LinkByName(a); err == nil {
				_ = netlink.LinkDel(l)
			}
		})
	}
	return prefix
}

// BenchmarkMetricsHandler serves /metrics in-process, gzip requested, with
// the default collectors and the process collectors on 100 veth
// interfaces: the scrape of
// BenchmarkScrapeManyInterfaces without HTTP and process boundaries, for
// -cpuprofile and -memprofile.
func BenchmarkMetricsHandler(b *testing.B) {
	manyVeths(b)
	app := kingpin.New(program, "")
	selection := collector.AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		b.Fatal(err)
	}
	set := collector.NewSet(selection.Build(slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler))
	defer set.Close()
	h := metricsHandler(set, processCollectors(), slog.New(slog.DiscardHandler), 0, 10*time.Second)
	serveOnce := func() {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("HTTP %d", rec.Code)
		}
	}
	serveOnce()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		serveOnce()
	}
}
