package main

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab/stat"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
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
//   - baseline-default, baseline-ethtool: with
//     XDP_EXPORTER_BASELINE=/path/to/xdp_exporter, another build (an
//     earlier commit) with its default collectors and with only its
//     ethtool (nic) collector.
//
// Each round scrapes every variant once, in an order drawn anew every
// round (a shuffle with a fixed seed, so a run can be repeated), with the
// same 20 ms pause after each scrape: under a plain rotation each variant
// always follows the same neighbour, whose leftover work (its garbage
// collection, its connections' teardown) can land in its time; the
// control was 1-2.4% off in such runs. It reports each variant's
// p50 and the median per-round ratios to ethtool (and of default and
// ethtool to their baselines). Run:
//
//	go test ./cmd/xdp_exporter -run '^$' -bench ScrapeManyInterfaces -benchtime 30x
func BenchmarkScrapeManyInterfaces(b *testing.B) {
	variants := scrapeVariants(b, manyVeths(b, "xb", 50, 4)+".*")
	for _, v := range variants { // warm-up: string sets, BTF, connections
		v.scrape(b)
		v.times = nil
	}
	order := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for range b.N {
		for _, i := range order.Perm(len(variants)) {
			variants[i].scrape(b)
			time.Sleep(20 * time.Millisecond)
		}
	}
	b.StopTimer()

	if n := strings.Count(variants[0].body, "\n"); !strings.Contains(variants[0].body, `xdp_nic_driver_info{`) {
		b.Fatalf("the default scrape (%d lines) has no ethtool series", n)
	}
	for _, line := range strings.Split(variants[0].body, "\n") {
		if strings.HasPrefix(line, "xdp_scrape_collector_success{") && strings.HasSuffix(line, " 0") {
			b.Errorf("default set: %s", line)
		}
	}
	reportScrapes(b, variants, [][2]string{{"ethtool-control", "ethtool"}, {"node_exporter", "ethtool"}, {"default", "baseline-default"}, {"ethtool", "baseline-ethtool"}})
}

// BenchmarkPrivilegeSeparation scrapes, over HTTP with gzip offered and in
// the shuffled rounds of BenchmarkScrapeManyInterfaces, three exporters
// with the default collectors on 100 veth interfaces:
//
//   - one-process: --no-runtime.privilege-separation, gathering, encoding
//     and serving in one process, as before 1.0;
//   - one-process-control: a second, identical instance, the noise control
//     (its ratio to one-process must be within 1%);
//   - separated: the default, an unprivileged server asking the monitor
//     for each exposition over the socket pair.
//
// Two instances of one build differed by 2-3% for as long as they ran (where
// each lands in memory and on the CPUs), so the rounds run in 10 epochs,
// each with freshly started exporters. It reports each p50 and the median
// per-round ratios to one-process. Run:
//
//	go test ./cmd/xdp_exporter -run '^$' -bench PrivilegeSeparation -benchtime 400x
func BenchmarkPrivilegeSeparation(b *testing.B) {
	manyVeths(b, "xp", 50, 4)
	variants := []*scrapeVariant{{name: "one-process"}, {name: "one-process-control"}, {name: "separated"}}
	args := map[string][]string{"one-process": {"--no-runtime.privilege-separation"}, "one-process-control": {"--no-runtime.privilege-separation"}}
	const epochs = 10
	order := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for epoch := range epochs {
		b.StopTimer()
		var running []*exportertest.Process
		for _, v := range variants {
			e := startExporter(b, args[v.name]...)
			running = append(running, e)
			v.url = "http://" + e.Addr + "/metrics"
			times := v.times
			v.scrape(b) // warm-up: string sets, BTF, connections
			v.times = times
		}
		b.StartTimer()
		for range (b.N + epochs - 1 - epoch) / epochs {
			for _, i := range order.Perm(len(variants)) {
				variants[i].scrape(b)
				time.Sleep(20 * time.Millisecond)
			}
		}
		b.StopTimer()
		for _, e := range running {
			e.Stop(b)
		}
	}
	reportScrapes(b, variants, [][2]string{{"one-process-control", "one-process"}, {"separated", "one-process"}})
}

// scrapeVariants starts the exporters the benchmark compares on the
// devices include matches.
func scrapeVariants(b *testing.B, include string) []*scrapeVariant {
	ethtoolOnly := []string{"--collector.disable-defaults", "--collector.nic",
		"--collector.nic.device-include=" + include}
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
		// The collector's name before 1.0, which this build still parses.
		addr = exportertest.FreeAddr(b)
		exportertest.Start(b, addr, exec.Command(bin, "--web.listen-address="+addr, "--collector.disable-defaults",
			"--collector.ethtool", "--collector.ethtool.device-include="+include))
		add("baseline-ethtool", addr)
	}
	if bin, err := exec.LookPath("prometheus-node-exporter"); err == nil {
		variants = append(variants, &scrapeVariant{name: "node_exporter", url: startNodeExporter(b, bin, include)})
	} else {
		b.Log("prometheus-node-exporter not installed: no comparison with it")
	}
	return variants
}

// scrape scrapes the variant once, as Prometheus does, and records the
// time it took and the body.
func (v *scrapeVariant) scrape(b *testing.B) {
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

// reportScrapes reports each variant's p50 and the median per-round
// ratios of the pairs given: both scrapes of a round saw the same
// machine, so slow drifts of its load cancel.
func reportScrapes(b *testing.B, variants []*scrapeVariant, ratios [][2]string) {
	byName := map[string]*scrapeVariant{}
	for _, v := range variants {
		byName[v.name] = v
		ts := slices.Sorted(slices.Values(v.times))
		p50 := ts[len(ts)/2]
		series := 0
		for _, line := range strings.Split(v.body, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				series++
			}
		}
		b.ReportMetric(float64(p50.Microseconds())/1000, v.name+"-p50-ms")
		b.Logf("%-16s p50 %7.2f ms over %d scrapes, %d samples", v.name, float64(p50.Microseconds())/1000, len(ts), series)
	}
	for _, r := range ratios {
		a, d := byName[r[0]], byName[r[1]]
		if a == nil || d == nil {
			continue
		}
		rs := make([]float64, len(a.times))
		for i := range rs {
			rs[i] = a.times[i].Seconds() / d.times[i].Seconds()
		}
		b.ReportMetric(stat.Median(rs), r[0]+"/"+r[1])
	}
}

// manyVeths makes n veth pairs of queues queues each, named after tag,
// removed when the test ends, and returns the prefix of their names.
func manyVeths(tb testing.TB, tag string, n, queues int) string {
	testenv.Privileged(tb)
	prefix := tag + vethns.UniqueID()[:6]
	for i := range n {
		a, p := fmt.Sprintf("%s%da", prefix, i), fmt.Sprintf("%s%db", prefix, i)
		err := netlink.LinkAdd(&netlink.Veth{
			LinkAttrs: netlink.LinkAttrs{Name: a, NumTxQueues: queues, NumRxQueues: queues},
			PeerName:  p, PeerNumTxQueues: uint32(queues), PeerNumRxQueues: uint32(queues),
		})
		testenv.Check(tb, err, "creating veth "+a)
		tb.Cleanup(func() {
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
	manyVeths(b, "xb", 50, 4)
	app := kingpin.New(program, "")
	selection := collector.AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		b.Fatal(err)
	}
	set := collector.NewSet(selection.Build(slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler))
	defer set.Close()
	h := metricsHandler(local(exposer(gatherer(set, processCollectors()), slog.New(slog.DiscardHandler))), slog.New(slog.DiscardHandler), 0, 10*time.Second)
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
