package top

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// parse builds a scrape at second t from exposition text.
func parse(t testing.TB, at float64, text string) *Scrape {
	t.Helper()
	return &Scrape{At: time.Unix(0, 0).Add(time.Duration(at * float64(time.Second))), Families: exportertest.Parse(t, text)}
}

func TestRatesCounterReset(t *testing.T) {
	prev := parse(t, 0, "# TYPE c counter\nc{q=\"0\"} 1000\nc{q=\"1\"} 10\n")
	cur := parse(t, 2, "# TYPE c counter\nc{q=\"0\"} 50\nc{q=\"1\"} 30\nc{q=\"2\"} 7\n")
	got := map[string]float64{}
	for _, s := range Rates(prev, cur, "c") {
		got[s.Get("q")] = s.Value
	}
	// q=0 restarted: 50 counted from zero over 2 s; q=2 is new: no rate.
	want := map[string]float64{"0": 25, "1": 10}
	if len(got) != len(want) || got["0"] != 25 || got["1"] != 10 {
		t.Fatalf("rates %v, want %v", got, want)
	}
}

// TestRxqViewObserved: observe mode's verdicts get a column each, and the
// source line names the programs observed.
func TestRxqViewObserved(t *testing.T) {
	const head = "# TYPE xdp_rxq_packets_total counter\n# TYPE xdp_rxq_observed_info gauge\n"
	info := `xdp_rxq_observed_info{device="eth0",attach_mode="native",prog_id="42"} 1
`
	prev := parse(t, 0, head+info+`xdp_rxq_packets_total{device="eth0",queue="0",cpu="0",action="pass"} 0
xdp_rxq_packets_total{device="eth0",queue="0",cpu="0",action="drop"} 0
xdp_rxq_packets_total{device="eth0",queue="1",cpu="1",action="drop"} 0
`)
	cur := parse(t, 1, head+info+`xdp_rxq_packets_total{device="eth0",queue="0",cpu="0",action="pass"} 1000
xdp_rxq_packets_total{device="eth0",queue="0",cpu="0",action="drop"} 3000
xdp_rxq_packets_total{device="eth0",queue="1",cpu="1",action="drop"} 5000
`)
	out := Render("rxq", prev, cur, "")
	wantFields(t, out,
		"observing eth0 prog 42",
		"RXQ stats  RXQ:CPU  pps  drop  pass",
		"rx_queue_index  0:0  4,000  3,000  1,000",
		"rx_queue_index  1:1  5,000  5,000  0")
}

// TestRxqViewComponents: the programs inside libxdp's dispatcher get a
// block each, in slot order, with the verdicts that go on to the next
// slot; a dispatcher the kernel would not let the exporter observe is
// named with its reason, and its components are drawn all the same.
func TestRxqViewComponents(t *testing.T) {
	const head = `# TYPE xdp_rxq_component_packets_total counter
# TYPE xdp_rxq_unobservable_info gauge
# TYPE xdp_bpf_dispatcher_component_info gauge
xdp_rxq_unobservable_info{device="eth0",attach_mode="native",prog_id="7",reason="busy"} 1
xdp_bpf_dispatcher_component_info{device="eth0",attach_mode="native",dispatcher_id="7",slot="0",prog_id="52",name="xdp_filter",tag="b",priority="10",chain_call_actions="pass",link_id="4"} 1
xdp_bpf_dispatcher_component_info{device="eth0",attach_mode="native",dispatcher_id="7",slot="1",prog_id="9",name="xdp_lb",tag="a",priority="50",chain_call_actions="",link_id="3"} 1
`
	counts := func(k float64) string {
		return fmt.Sprintf(`xdp_rxq_component_packets_total{device="eth0",queue="0",cpu="0",action="drop",prog_id="52",name="xdp_filter"} %g
xdp_rxq_component_packets_total{device="eth0",queue="0",cpu="0",action="pass",prog_id="52",name="xdp_filter"} %g
xdp_rxq_component_packets_total{device="eth0",queue="1",cpu="1",action="pass",prog_id="52",name="xdp_filter"} %g
xdp_rxq_component_packets_total{device="eth0",queue="0",cpu="0",action="tx",prog_id="9",name="xdp_lb"} %g
xdp_rxq_component_packets_total{device="eth0",queue="1",cpu="1",action="tx",prog_id="9",name="xdp_lb"} %g
`, 3000*k, 1000*k, 2000*k, 1000*k, 2000*k)
	}
	out := Render("rxq", parse(t, 0, head+counts(0)), parse(t, 1, head+counts(1)), "")
	wantFields(t, out,
		"not observable: eth0 prog 7 (busy)",
		"Device eth0",
		"Dispatcher  RXQ:CPU  pps  drop  pass  tx",
		"source: rxq collector in observe mode (xdp_rxq_component_packets_total)",
		"slot 0: prog 52 xdp_filter, pass goes on to the next slot",
		"slot 1: prog 9 xdp_lb, no verdict goes on to the next slot",
		"component  0:0  4,000  3,000  1,000  0",
		"component  1:1  2,000  0      2,000  0",
		"component  0:0  1,000  0      0      1,000")
	if strings.Index(out, "slot 0:") > strings.Index(out, "slot 1:") {
		t.Errorf("components not in slot order:\n%s", out)
	}
	if strings.Contains(out, "XDP-RX CPU") {
		t.Errorf("per-CPU totals of the device drawn without its final verdicts:\n%s", out)
	}
}

func TestRxqView(t *testing.T) {
	const head = "# TYPE xdp_rxq_packets_total counter\n# TYPE xdp_rxq_issues_total counter\n"
	prev := parse(t, 0, head+`xdp_rxq_packets_total{device="eth0",queue="0",cpu="0"} 0
xdp_rxq_packets_total{device="eth0",queue="1",cpu="0"} 0
xdp_rxq_packets_total{device="eth0",queue="2",cpu="2"} 0
xdp_rxq_issues_total{device="eth0",reason="queue_out_of_range"} 0
`)
	cur := parse(t, 1, head+`xdp_rxq_packets_total{device="eth0",queue="0",cpu="0"} 1000000
xdp_rxq_packets_total{device="eth0",queue="1",cpu="0"} 2000000
xdp_rxq_packets_total{device="eth0",queue="2",cpu="2"} 500000
xdp_rxq_issues_total{device="eth0",reason="queue_out_of_range"} 3
# TYPE xdp_pcie_device_info gauge
xdp_pcie_device_info{device="eth0",pci_address="0000:03:00.0",numa_node="0"} 1
# TYPE xdp_pcie_cpu_info gauge
xdp_pcie_cpu_info{cpu="0",numa_node="0"} 1
xdp_pcie_cpu_info{cpu="2",numa_node="1"} 1
`)
	out := Render("rxq", prev, cur, "")
	wantFields(t, out,
		"XDP-RX CPU  0      3,000,000",
		"XDP-RX CPU  2      500,000 remote NUMA node",
		"XDP-RX CPU  total  3,500,000  3",
		"rx_queue_index  1:0      2,000,000",
		"CPU 0 serves 2 busy queues")
	if containsFields(out, "XDP-RX CPU 0 3,000,000 remote") {
		t.Errorf("CPU 0 is on the NIC's node but marked remote:\n%s", out)
	}
	if strings.Contains(out, "CPU 2 serves") {
		t.Errorf("CPU 2 has one queue:\n%s", out)
	}
}

// containsFields matches want's whitespace-separated fields on one line.
// wantFields fails t for each of wants that no line of out contains.
func wantFields(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !containsFields(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func containsFields(out, want string) bool {
	w := strings.Join(strings.Fields(want), " ")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(strings.Join(strings.Fields(line), " "), w) {
			return true
		}
	}
	return false
}

func TestNapiView(t *testing.T) {
	hist := func(at float64, b1, b2, inf, sum float64) *Scrape {
		return parse(t, at, "# TYPE xdp_napi_poll_work histogram\n"+
			"xdp_napi_poll_work_bucket{device=\"eth0\",context=\"idle\",le=\"1\"} "+ftoa(b1)+"\n"+
			"xdp_napi_poll_work_bucket{device=\"eth0\",context=\"idle\",le=\"64\"} "+ftoa(b2)+"\n"+
			"xdp_napi_poll_work_bucket{device=\"eth0\",context=\"idle\",le=\"+Inf\"} "+ftoa(inf)+"\n"+
			"xdp_napi_poll_work_sum{device=\"eth0\",context=\"idle\"} "+ftoa(sum)+"\n"+
			"xdp_napi_poll_work_count{device=\"eth0\",context=\"idle\"} "+ftoa(inf)+"\n")
	}
	// Over 2 s: 10 polls of 1 packet and 30 polls of 64.
	hs := HistogramRates(hist(0, 5, 5, 5, 5), hist(2, 15, 45, 45, 5+10+30*64), "xdp_napi_poll_work")
	if len(hs) != 1 {
		t.Fatalf("%d histograms", len(hs))
	}
	h := hs[0]
	if h.PerSec[0] != 5 || h.PerSec[1] != 15 || h.PerSec[2] != 0 || h.Count != 20 || h.SumRate != (10+30*64)/2.0 {
		t.Fatalf("per-bucket rates %v, count %v, sum %v", h.PerSec, h.Count, h.SumRate)
	}
	out := Render("napi", hist(0, 5, 5, 5, 5), hist(2, 15, 45, 45, 5+10+30*64), "")
	if !strings.Contains(out, "average bulk 48.2") || !strings.Contains(out, "idle 100.0%") {
		t.Errorf("napi view:\n%s", out)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func TestNICViewOnlyChanged(t *testing.T) {
	const head = "# TYPE xdp_nic_driver_info gauge\n# TYPE xdp_nic_stat_rx_packets untyped\n# TYPE xdp_nic_rx_page_cache_events_total counter\n# TYPE xdp_nic_channels gauge\n"
	prev := parse(t, 0, head+`xdp_nic_driver_info{device="eth0",driver="mlx5_core"} 1
xdp_nic_stat_rx_packets{device="eth0"} 100
xdp_nic_stat_rx_packets{device="eth1"} 100
xdp_nic_rx_page_cache_events_total{device="eth0",queue="0",event="empty"} 0
xdp_nic_channels{device="eth0",channel="combined"} 8
`)
	cur := parse(t, 1, head+`xdp_nic_driver_info{device="eth0",driver="mlx5_core"} 1
xdp_nic_stat_rx_packets{device="eth0"} 600
xdp_nic_stat_rx_packets{device="eth1"} 100
xdp_nic_rx_page_cache_events_total{device="eth0",queue="0",event="empty"} 7
xdp_nic_channels{device="eth0",channel="combined"} 8
`)
	out := Render("nic", prev, cur, "")
	wantFields(t, out, "eth0 stat_rx_packets 500", "eth0 * rx_page_cache_events_total{queue=0,event=empty} 7", "eth0: combined channels 8")
	if strings.Contains(out, "eth1") {
		t.Errorf("eth1 changed nothing but is listed:\n%s", out)
	}
}

// TestNICViewSignals: the NIC view's line per device has the benchmark notes'
// port load, its drops for lack of host resources by counter and their
// share, and the allocation failures, each with its source.
func TestNICViewSignals(t *testing.T) {
	const head = "# TYPE xdp_nic_driver_info gauge\n# TYPE xdp_nic_signal_source_info gauge\n# TYPE xdp_nic_port_packets_total counter\n# TYPE xdp_nic_rx_host_drops_total counter\n# TYPE xdp_nic_rx_alloc_failures_total counter\n"
	scrape := func(at, k float64) *Scrape {
		return parse(t, at, head+fmt.Sprintf(`xdp_nic_driver_info{device="mlx5p1",driver="mlx5_core"} 1
xdp_nic_port_packets_total{device="mlx5p1",direction="rx"} %g
xdp_nic_port_packets_total{device="mlx5p1",direction="tx"} 0
xdp_nic_rx_host_drops_total{device="mlx5p1",where="port"} %g
xdp_nic_rx_host_drops_total{device="mlx5p1",where="ring"} %g
xdp_nic_rx_alloc_failures_total{device="mlx5p1"} %g
xdp_nic_rx_host_drops_total{device="veth0"} %g
xdp_nic_signal_source_info{device="mlx5p1",family="xdp_nic_port_packets_total",direction="rx",source="ethtool",stat="rx_packets_phy"} 1
xdp_nic_signal_source_info{device="mlx5p1",family="xdp_nic_port_packets_total",direction="tx",source="ethtool",stat="tx_packets_phy"} 1
xdp_nic_signal_source_info{device="mlx5p1",family="xdp_nic_rx_host_drops_total",where="port",source="ethtool",stat="rx_discards_phy"} 1
xdp_nic_signal_source_info{device="mlx5p1",family="xdp_nic_rx_host_drops_total",where="ring",source="ethtool",stat="rx_out_of_buffer"} 1
xdp_nic_signal_source_info{device="mlx5p1",family="xdp_nic_rx_alloc_failures_total",source="netdev_qstats",stat="rx-alloc-fail"} 1
xdp_nic_signal_source_info{device="veth0",family="xdp_nic_rx_host_drops_total",source="link_stats64",stat="rx_dropped"} 1
`, k*88049446, k*13760980, k*93624, k*5, k*12))
	}
	out := Render("nic", scrape(0, 0), scrape(1, 1), "")
	wantFields(t, out,
		"mlx5p1: port rx 88,049,446 pps (ethtool); host-resource drops 13,854,604 pps (ethtool: rx_discards_phy port 13,760,980, rx_out_of_buffer ring 93,624, 15.7% of port rx); rx alloc failures 5/s (netdev_qstats)",
		"veth0: host-resource drops 12 pps (link_stats64: rx_dropped 12)",
		"mlx5p1 * rx_host_drops_total{where=port} 13,760,980")
}

// TestNICViewUncore: the NIC view shows, per device, its root complex's
// measured bytes and its socket's DDIO write miss share; a device whose
// socket counts misses alone gets no share.
func TestNICViewUncore(t *testing.T) {
	const head = "# TYPE xdp_nic_driver_info gauge\n# TYPE xdp_uncore_iio_device_info gauge\n# TYPE xdp_uncore_iio_bytes_total counter\n# TYPE xdp_uncore_ddio_requests_total counter\n"
	scrape := func(at, k float64) *Scrape {
		return parse(t, at, head+fmt.Sprintf(`xdp_nic_driver_info{device="eth0",driver="mlx5_core"} 1
xdp_uncore_iio_device_info{device="eth0",socket="0",iio="1",root_bus="0000:3a"} 1
xdp_uncore_iio_device_info{device="eth1",socket="1",iio="0",root_bus="0000:ae"} 1
xdp_uncore_iio_bytes_total{socket="0",iio="1",root_bus="0000:3a",transaction="inbound",op="write"} %g
xdp_uncore_iio_bytes_total{socket="0",iio="1",root_bus="0000:3a",transaction="outbound",op="read"} %g
xdp_uncore_iio_bytes_total{socket="0",iio="1",root_bus="0000:3a",transaction="inbound",op="read"} %g
xdp_uncore_iio_bytes_total{socket="1",iio="0",root_bus="0000:ae",transaction="inbound",op="write"} %g
xdp_uncore_ddio_requests_total{socket="0",request="itom",result="hit"} %g
xdp_uncore_ddio_requests_total{socket="0",request="itomcachenear",result="miss"} %g
xdp_uncore_ddio_requests_total{socket="0",request="pcirdcur",result="miss"} %g
xdp_uncore_ddio_requests_total{socket="1",request="itom",result="miss"} %g
`, 900e6*k, 10e6*k, 50e6*k, 7e6*k, 6e6*k, 4e6*k, 9e6*k, 5e6*k))
	}
	out := Render("nic", scrape(0, 0), scrape(1, 1), "")
	wantFields(t, out,
		"eth0: root complex 0000:3a (socket 0) up 910.0 MB/s, down 50.0 MB/s measured; DDIO write misses 40.0%",
		"eth1: root complex 0000:ae (socket 1) up 7.0 MB/s, down 0.0 MB/s measured")
	if strings.Contains(out, "eth1: root complex 0000:ae (socket 1) up 7.0 MB/s, down 0.0 MB/s measured; DDIO") {
		t.Errorf("socket 1 counts misses alone, yet shows a share:\n%s", out)
	}
}

func TestViewsSayWhichCollector(t *testing.T) {
	empty := parse(t, 0, "# TYPE up gauge\nup 1\n")
	later := parse(t, 1, "# TYPE up gauge\nup 1\n")
	for view, collector := range map[string]string{"xdp": "monitor", "napi": "napi", "nic": "nic", "cpu": "cpu", "rxq": "rxq", "drop": "drop"} {
		if out := Render(view, empty, later, ""); !strings.Contains(out, "--collector."+collector) {
			t.Errorf("%s view without its families says %q", view, out)
		}
	}
}

// collectorFixture is the scrape of the collectors' whole-host fixture (a
// 128-CPU host with two 64-queue mlx5 ports) by the collectors that read
// no running kernel: cpu, ethtool, netdev, pcie (collector.TestHostRecording
// records it).
const collectorFixture = "testdata/host.prom"

// bigHost is that scrape with every counter scaled by v, so two of them
// give rates, plus what the collectors' fixtures cannot give (the BPF
// collectors' families, perf): rxq per queue and CPU, exceptions and
// devmap transmits, the napi histogram per device and context, and perf
// per CPU, in the shape the exporter exports them.
func bigHost(t testing.TB, v float64) string {
	raw, err := os.ReadFile(collectorFixture)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	counter := regexp.MustCompile(`^# TYPE \S+ (counter|untyped)$`)
	scale := false
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			scale = counter.MatchString(line)
		}
		if i := strings.LastIndexByte(line, ' '); scale && !strings.HasPrefix(line, "#") && i > 0 {
			x, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			line = line[:i+1] + strconv.FormatFloat(x*v, 'g', -1, 64)
		}
		w("%s\n", line)
	}
	w("# TYPE xdp_rxq_packets_total counter\n")
	for d := range 2 {
		for q := range 64 {
			w("xdp_rxq_packets_total{device=\"mlx5p%d\",queue=\"%d\",cpu=\"%d\"} %g\n", d, q, q+64*d, 1e6*v)
		}
	}
	w("# TYPE xdp_monitor_tracepoint_attached gauge\nxdp_monitor_tracepoint_attached{tracepoint=\"xdp:xdp_exception\"} 1\n")
	w("# TYPE xdp_monitor_exceptions_total counter\n# TYPE xdp_monitor_devmap_xmit_packets_total counter\n# TYPE xdp_monitor_devmap_xmit_bulks_total counter\n")
	for d := range 2 {
		for _, a := range []string{"aborted", "drop", "tx", "redirect"} {
			w("xdp_monitor_exceptions_total{device=\"mlx5p%d\",prog_id=\"7\",action=\"%s\"} %g\n", d, a, 10*v)
		}
		w("xdp_monitor_devmap_xmit_packets_total{from_device=\"mlx5p%d\",to_device=\"mlx5p%d\"} %g\n", d, 1-d, 1.6e7*v)
		w("xdp_monitor_devmap_xmit_bulks_total{from_device=\"mlx5p%d\",to_device=\"mlx5p%d\"} %g\n", d, 1-d, 1e6*v)
	}
	w("# TYPE xdp_napi_poll_work histogram\n")
	for d := range 2 {
		for _, c := range []string{"idle", "ksoftirqd", "other"} {
			for le := 0; le <= 64; le++ {
				w("xdp_napi_poll_work_bucket{device=\"mlx5p%d\",context=\"%s\",le=\"%d\"} %g\n", d, c, le, float64(le)*v)
			}
			w("xdp_napi_poll_work_bucket{device=\"mlx5p%d\",context=\"%s\",le=\"+Inf\"} %g\n", d, c, 64*v)
			w("xdp_napi_poll_work_sum{device=\"mlx5p%d\",context=\"%s\"} %g\n", d, c, 2000*v)
			w("xdp_napi_poll_work_count{device=\"mlx5p%d\",context=\"%s\"} %g\n", d, c, 64*v)
		}
	}
	w("# TYPE xdp_perf_cycles_total counter\n# TYPE xdp_perf_instructions_total counter\n")
	for c := range 128 {
		w("xdp_perf_cycles_total{cpu=\"%d\"} %g\n", c, 3e9*v)
		w("xdp_perf_instructions_total{cpu=\"%d\"} %g\n", c, 2e9*v)
	}
	return b.String()
}

// BenchmarkRender draws each view of the change between two scrapes of
// bigHost: the work of one refresh, without the scrape.
func BenchmarkRender(b *testing.B) {
	prev, cur := parse(b, 0, bigHost(b, 1)), parse(b, 1, bigHost(b, 2))
	for _, v := range Views {
		b.Run(v, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if out := Render(v, prev, cur, ""); len(out) == 0 {
					b.Fatalf("view %s is empty", v)
				}
			}
		})
	}
}

// BenchmarkTopCPU runs the xdp-top binary in tmux (160x60) at its 1 s
// interval against bigHost served by promhttp, for 60 s per view, and
// reports the share of one CPU it used (utime+stime from /proc/PID/stat).
//
//	go test ./cmd/xdp-top/internal/top -run '^$' -bench TopCPU -benchtime 1x
func BenchmarkTopCPU(b *testing.B) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Fatal("tmux not installed")
	}
	bin := filepath.Join(b.TempDir(), "xdp-top")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		b.Fatalf("building xdp-top: %v\n%s", err, out)
	}
	var n atomic.Int64
	srv := httptest.NewServer(promhttp.HandlerFor(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		var out []*dto.MetricFamily
		for _, mf := range parse(b, 0, bigHost(b, float64(n.Add(1)))).Families {
			out = append(out, mf)
		}
		return out, nil
	}), promhttp.HandlerOpts{}))
	defer srv.Close()
	cpuSeconds := func(pid string) float64 {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		return (utime + stime) / 100 // USER_HZ
	}
	for range b.N {
		for _, view := range []string{"overview", "nic", "cpu"} {
			session := "xdptop-bench-" + view
			if out, err := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "60",
				bin, "--endpoint", srv.URL, "--view", view).CombinedOutput(); err != nil {
				b.Fatalf("tmux: %v\n%s", err, out)
			}
			time.Sleep(2 * time.Second)
			out, err := exec.Command("tmux", "display-message", "-p", "-t", session, "#{pane_pid}").Output()
			if err != nil {
				b.Fatal(err)
			}
			pid := strings.TrimSpace(string(out))
			start, t0 := cpuSeconds(pid), time.Now()
			time.Sleep(60 * time.Second)
			used := (cpuSeconds(pid) - start) / time.Since(t0).Seconds()
			_ = exec.Command("tmux", "kill-session", "-t", session).Run()
			b.ReportMetric(100*used, view+"-%cpu")
		}
	}
}

// TestDropView lists drop reasons by rate, the largest first, with the
// device ("(none)" for skbs that had none), and the untracked drops.
func TestDropView(t *testing.T) {
	const head = "# TYPE xdp_drop_packets_total counter\n# TYPE xdp_drop_untracked_total counter\n"
	prev := parse(t, 0, head+`xdp_drop_packets_total{device="eth0",reason="NO_SOCKET"} 100
xdp_drop_packets_total{device="eth0",reason="NETFILTER_DROP"} 0
xdp_drop_packets_total{reason="NOT_SPECIFIED"} 5
xdp_drop_untracked_total 0
`)
	cur := parse(t, 2, head+`xdp_drop_packets_total{device="eth0",reason="NO_SOCKET"} 300
xdp_drop_packets_total{device="eth0",reason="NETFILTER_DROP"} 2000000
xdp_drop_packets_total{reason="NOT_SPECIFIED"} 9
xdp_drop_untracked_total 40
`)
	out := Render("drop", prev, cur, "")
	lines := strings.Split(out, "\n")
	for i, want := range []string{"reason device drops/s", "NETFILTER_DROP eth0 1,000,000", "NO_SOCKET eth0 100", "NOT_SPECIFIED (none) 2",
		"(untracked: the collector's table is full) 20"} {
		if i >= len(lines) || strings.Join(strings.Fields(lines[i]), " ") != want {
			t.Errorf("line %d: want %q in:\n%s", i, want, out)
		}
	}
	if over := Render("overview", prev, cur, ""); !containsFields(over, "drop stack drops 1,000,102/s") {
		t.Errorf("overview:\n%s", over)
	}
}

// TestNICViewConfig: the NIC view's configuration line per device: link
// speed with the port's share of its 64-byte line rate, coalescing, pause
// settings and frames, the RSS table's queue weights, and the RX queues'
// interrupts with packets per interrupt.
func TestNICViewConfig(t *testing.T) {
	const head = "# TYPE xdp_nic_driver_info gauge\n# TYPE xdp_nic_link_speed_bytes_per_second gauge\n# TYPE xdp_nic_port_packets_total counter\n" +
		"# TYPE xdp_nic_coalesce_delay_seconds gauge\n# TYPE xdp_nic_coalesce_max_frames gauge\n# TYPE xdp_nic_coalesce_adaptive gauge\n" +
		"# TYPE xdp_nic_pause_enabled gauge\n# TYPE xdp_nic_pause_frames_total counter\n# TYPE xdp_nic_channels gauge\n# TYPE xdp_nic_rss_info gauge\n" +
		"# TYPE xdp_nic_rss_indirection_entries gauge\n# TYPE xdp_pcie_rx_queue_interrupts_total counter\n# TYPE xdp_netdev_queue_rx_packets_total counter\n"
	scrape := func(at, k float64) *Scrape {
		return parse(t, at, head+fmt.Sprintf(`xdp_nic_driver_info{device="mlx5p1",driver="mlx5_core"} 1
xdp_nic_link_speed_bytes_per_second{device="mlx5p1"} 1.25e10
xdp_nic_port_packets_total{device="mlx5p1",direction="rx",source="eth_mac"} %g
xdp_nic_coalesce_delay_seconds{device="mlx5p1",direction="rx"} 8e-06
xdp_nic_coalesce_delay_seconds{device="mlx5p1",direction="tx"} 1.6e-05
xdp_nic_coalesce_max_frames{device="mlx5p1",direction="rx"} 128
xdp_nic_coalesce_max_frames{device="mlx5p1",direction="tx"} 32
xdp_nic_coalesce_adaptive{device="mlx5p1",direction="rx"} 1
xdp_nic_coalesce_adaptive{device="mlx5p1",direction="tx"} 0
xdp_nic_pause_enabled{device="mlx5p1",direction="rx"} 1
xdp_nic_pause_enabled{device="mlx5p1",direction="tx"} 0
xdp_nic_pause_frames_total{device="mlx5p1",direction="rx"} %g
xdp_nic_channels{device="mlx5p1",channel="combined"} 3
xdp_nic_rss_info{device="mlx5p1",hash_function="toeplitz",table_size="12"} 1
xdp_nic_rss_indirection_entries{device="mlx5p1",queue="0"} 6
xdp_nic_rss_indirection_entries{device="mlx5p1",queue="1"} 6
xdp_pcie_rx_queue_interrupts_total{device="mlx5p1",queue="0",irq="300"} %g
xdp_pcie_rx_queue_interrupts_total{device="mlx5p1",queue="1",irq="301"} %g
xdp_netdev_queue_rx_packets_total{device="mlx5p1",queue="0",direction="rx"} %g
xdp_netdev_queue_rx_packets_total{device="mlx5p1",queue="1",direction="rx"} %g
`, k*88049446, k*40, k*100000, k*150000, k*4e6, k*6e6))
	}
	out := Render("nic", scrape(0, 0), scrape(1, 1), "")
	wantFields(t, out, "mlx5p1: link 100 Gbit/s (port rx 59.2% of 64-byte line rate); coalesce rx 8us/128 frames adaptive, tx 16us/32 frames; "+
		"pause rx on tx off (frames rx 40/s, tx 0/s); RSS toeplitz 12 entries, queue weight 0.00-1.50; RX queue interrupts 250,000/s, 40.0 packets per interrupt")
}
