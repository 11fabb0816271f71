package collector

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

func newLiveNetdev(t testing.TB, cfg NetdevConfig) *netdevCollector {
	t.Helper()
	c, err := dialNetdevCollector(cfg, slog.New(slog.DiscardHandler))
	checkNetdev(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// checkNetdev fails the test when the netdev collector could not start,
// except on a kernel older than the netdev family (6.3), where it must be
// unsupported, and the test, which needs the family, ends there.
func checkNetdev(t testing.TB, err error) {
	t.Helper()
	if unsupportedOnly(err) && testenv.KernelBefore(t, 6, 3) {
		t.Skipf("Linux before 6.3 has no netdev generic netlink family, and the collector says so: %v", err)
	}
	testenv.Check(t, err, "netdev generic netlink family")
}

func sysfsCounter(t *testing.T, dev, name string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/net", dev, "statistics", name))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return float64(v)
}

// TestNetdevQstatsEth0 reads qstats of the VM's virtio_net eth0 and checks
// them against the kernel's rtnl_link_stats64 in sysfs, read just before
// and just after: the counters are live, so qstats must lie in between.
func TestNetdevQstatsEth0(t *testing.T) {
	driver, err := os.Readlink("/sys/class/net/eth0/device/driver")
	if err != nil || filepath.Base(driver) != "virtio_net" {
		testenv.Unavailable(t, "needs a virtio_net eth0 (qstats via netdev_stat_ops): %v", err)
		return
	}
	c := newLiveNetdev(t, NetdevConfig{Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile("^eth0$"), nil)}, PerQueueStats: true})
	stats := []string{"rx_packets", "rx_bytes", "tx_packets", "tx_bytes"}
	before := map[string]float64{}
	for _, s := range stats {
		before[s] = sysfsCounter(t, "eth0", s)
	}
	mfs := gather(t, c)
	for _, s := range stats {
		after := sysfsCounter(t, "eth0", s)
		dev := value(t, mfs, "xdp_netdev_qstats_"+s+"_total", "device", "eth0")
		queues, n := exportertest.Match(mfs, "xdp_netdev_queue_"+s+"_total", "device", "eth0")
		if n == 0 {
			t.Errorf("no per-queue %s for eth0", s)
		}
		for what, v := range map[string]float64{"device": dev, "queue sum": queues} {
			if v < before[s] || v > after {
				t.Errorf("eth0 %s %s = %.0f, want within sysfs [%.0f, %.0f]", what, s, v, before[s], after)
			}
		}
	}
	if v := value(t, mfs, "xdp_netdev_qstats_rx_packets_total", "device", "eth0"); v == 0 {
		t.Error("eth0 received no packets at all")
	}
	if v := value(t, mfs, "xdp_netdev_xdp_feature", "device", "eth0", "feature", "basic"); v != 1 {
		t.Errorf("virtio_net basic XDP = %v, want 1", v)
	}
	if _, n := exportertest.Match(mfs, "xdp_netdev_queue_info", "device", "eth0", "type", "rx", "queue", "0"); n != 1 {
		t.Errorf("queue_info for eth0 rx 0: %d series, want 1", n)
	}
}

// TestNetdevVeth checks XDP features, queues and NAPI instances of a lab
// veth: veth only runs NAPI while an XDP program is attached, so the NAPI
// instances must appear with the program and vanish with it.
func TestNetdevVeth(t *testing.T) {
	const queues = 2
	pair := vethtest.Pair(t, queues)
	dev := pair.Host.Name
	c := newLiveNetdev(t, NetdevConfig{Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile("^"+dev+"$"), nil)}, PerQueueStats: true})

	mfs := gather(t, c)
	if _, n := exportertest.Match(mfs, "xdp_netdev_napi_info", "device", dev); n != 0 {
		t.Fatalf("veth without XDP has %d NAPI instances, want 0", n)
	}
	for feature, want := range map[string]float64{"basic": 1, "redirect": 1, "rx-sg": 1, "hw-offload": 0, "xsk-zerocopy": 0} {
		if v := value(t, mfs, "xdp_netdev_xdp_feature", "device", dev, "feature", feature); v != want {
			t.Errorf("veth XDP feature %s = %v, want %v", feature, v, want)
		}
	}

	drop, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}, // XDP_DROP
	})
	testenv.Check(t, err, "loading an XDP_DROP program")
	defer drop.Close()
	l, err := link.AttachXDP(link.XDPOptions{Program: drop, Interface: pair.Host.Index})
	testenv.Check(t, err, "attaching XDP to veth")

	const n = 20_000
	vethtest.SendExactly(t, pair, n)

	mfs = gather(t, c)
	napiIDs := map[string]bool{}
	for _, m := range mfs["xdp_netdev_napi_info"].GetMetric() {
		if exportertest.Matches(m, "device", dev) {
			napiIDs[labelValue(m, "napi_id")] = true
		}
	}
	if len(napiIDs) != queues {
		t.Errorf("veth with XDP has NAPI ids %v, want %d distinct", napiIDs, queues)
	}
	for _, typ := range []string{"rx", "tx"} {
		for q := range queues {
			_, got := exportertest.Match(mfs, "xdp_netdev_queue_info", "device", dev, "type", typ, "queue", strconv.Itoa(q))
			if got != 1 {
				t.Errorf("queue_info %s %d: %d series, want 1", typ, q, got)
			}
		}
	}
	// veth does not link queues to NAPIs (netif_queue_set_napi) as of 6.18;
	// when a kernel does, the ids must be the NAPIs napi-get listed.
	for _, m := range mfs["xdp_netdev_queue_info"].GetMetric() {
		if id := labelValue(m, "napi_id"); exportertest.Matches(m, "device", dev) && id != "" && !napiIDs[id] {
			t.Errorf("queue_info napi_id %s is not one of the device's NAPIs %v", id, napiIDs)
		}
	}
	// veth has no netdev_stat_ops on this kernel; where it has, qstats must
	// count exactly what veth's own ethtool counters saw.
	if _, ok := mfs["xdp_netdev_qstats_rx_packets_total"]; ok {
		st := vethtest.EthtoolS(t, "", dev)
		for q := range queues {
			want := float64(st["rx_queue_"+strconv.Itoa(q)+"_xdp_packets"])
			if v := value(t, mfs, "xdp_netdev_queue_rx_packets_total", "device", dev, "queue", strconv.Itoa(q)); v != want {
				t.Errorf("veth queue %d qstats rx-packets = %v, ethtool says %v", q, v, want)
			}
		}
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mfs = gather(t, c)
	if _, n := exportertest.Match(mfs, "xdp_netdev_napi_info", "device", dev); n != 0 {
		t.Errorf("veth after detaching XDP still has %d NAPI instances", n)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// TestNetdevLiveUnsupported runs the collector on this kernel twice: the
// commands the kernel lacks (page-pool-stats-get without
// CONFIG_PAGE_POOL_STATS) are logged once and never fail a scrape.
func TestNetdevLiveUnsupported(t *testing.T) {
	var log bytes.Buffer
	c, err := dialNetdevCollector(NetdevConfig{Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile("^lo$"), nil)}}, slog.New(slog.NewTextHandler(&log, nil)))
	checkNetdev(t, err)
	defer c.Close()
	gather(t, c)
	gather(t, c)
	for _, name := range netdev.CmdNames {
		if n := strings.Count(log.String(), "command="+name+" "); n > 1 {
			t.Errorf("%s logged %d times as unsupported, want at most once:\n%s", name, n, log.String())
		}
	}
	t.Logf("log:\n%s", log.String())
}

// replayCollector builds the collector on the fixtures; override swaps a
// request's file (or, with "", makes the command unsupported).
func replayCollector(t testing.TB, cfg NetdevConfig, override map[string]string) (Collector, *replaySource, *bytes.Buffer) {
	src := &replaySource{dir: netdevReplies, override: override}
	var log bytes.Buffer
	c := newNetdevCollector(cfg, slog.New(slog.NewTextHandler(&log, nil)), src)
	return onLinks{c, fixtureLinks()}, src, &log
}

// TestNetdevReplayCaptured decodes the replies captured from this VM's kernel.
func TestNetdevReplayCaptured(t *testing.T) {
	c, _, _ := replayCollector(t, NetdevConfig{PerQueueStats: true}, nil)
	mfs := gather(t, c)
	// The values below are the ones in the captured hex (see the files).
	for name, want := range map[string]float64{
		"xdp_netdev_qstats_rx_packets_total": 0x2879, "xdp_netdev_qstats_rx_bytes_total": 0x0be10987,
		"xdp_netdev_qstats_tx_packets_total": 0x24ff, "xdp_netdev_qstats_tx_bytes_total": 0x0ecef1,
		"xdp_netdev_qstats_tx_stop_total": 0, "xdp_netdev_qstats_tx_wake_total": 0,
	} {
		if v := value(t, mfs, name, "device", "eth0"); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v := value(t, mfs, "xdp_netdev_queue_rx_packets_total", "device", "eth0", "queue", "0", "type", "rx"); v != 0x2879 {
		t.Errorf("eth0 rx queue 0 packets = %v", v)
	}
	if _, ok := mfs["xdp_netdev_qstats_rx_hw_drops_total"]; ok {
		t.Error("virtio_net does not report rx-hw-drops, yet a series appeared")
	}
	for feature, want := range map[string]float64{"basic": 1, "redirect": 1, "ndo-xmit": 0, "xsk-zerocopy": 1, "rx-sg": 1} {
		if v := value(t, mfs, "xdp_netdev_xdp_feature", "device", "eth0", "feature", feature); v != want {
			t.Errorf("eth0 feature %s = %v, want %v", feature, v, want)
		}
	}
	if v := value(t, mfs, "xdp_netdev_queue_info", "device", "eth0", "queue", "0", "type", "rx", "napi_id", "257", "irq", ""); v != 1 {
		t.Errorf("eth0 queue_info = %v", v)
	}
	if _, ok := mfs["xdp_netdev_page_pool_inflight_pages"]; !ok {
		t.Error("page pool fixture not decoded")
	}
}

// TestNetdevReplayConstructed decodes the constructed page-pool and IRQ
// replies and joins queues to IRQ affinity from a fake /proc/irq.
func TestNetdevReplayConstructed(t *testing.T) {
	procFS := t.TempDir()
	procIRQ := filepath.Join(procFS, "irq")
	for irq, cpus := range map[string][2]string{"41": {"0-3", "2"}, "42": {"0-3", "2"}} {
		if err := os.MkdirAll(filepath.Join(procIRQ, irq), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(procIRQ, irq, "smp_affinity_list"), []byte(cpus[0]+"\n"), 0o644)
		os.WriteFile(filepath.Join(procIRQ, irq, "effective_affinity_list"), []byte(cpus[1]+"\n"), 0o644)
	}
	c, _, _ := replayCollector(t, NetdevConfig{ProcFS: procFS},
		map[string]string{"napi-get": "napi-get-irq", "queue-get": "queue-get-irq"})
	mfs := gather(t, c)

	for _, q := range constructedIRQs {
		queue, napi, irq := strconv.Itoa(int(q.queue)), strconv.Itoa(int(q.napi)), strconv.Itoa(int(q.irq))
		if v := value(t, mfs, "xdp_netdev_queue_info", "device", "eth0", "queue", queue, "type", "rx",
			"napi_id", napi, "irq", irq, "cpus", "0-3", "effective_cpus", "2"); v != 1 {
			t.Errorf("queue %s info = %v", queue, v)
		}
		if v := value(t, mfs, "xdp_netdev_napi_gro_flush_timeout_seconds", "napi_id", napi); v != 200e-6 {
			t.Errorf("gro flush timeout = %v", v)
		}
	}
	for _, p := range constructedPools {
		id := strconv.FormatUint(p.id, 10)
		dev := fixtureNames[p.ifindex]
		if p.ifindex == 0 {
			dev = ""
		}
		if v := value(t, mfs, "xdp_netdev_page_pool_inflight_pages", "pool_id", id, "device", dev); v != float64(p.inflight) {
			t.Errorf("pool %s inflight = %v, want %v", id, v, p.inflight)
		}
		if v := value(t, mfs, "xdp_netdev_page_pool_inflight_bytes", "pool_id", id); v != float64(p.inflight*4096) {
			t.Errorf("pool %s inflight bytes = %v", id, v)
		}
		detached := 0.0
		if p.detached != 0 {
			detached = 1
		}
		if v := value(t, mfs, "xdp_netdev_page_pool_detached", "pool_id", id); v != detached {
			t.Errorf("pool %s detached = %v", id, v)
		}
		if p.ifindex == 0 {
			continue
		}
		napi := strconv.FormatUint(p.napi, 10)
		for i, stat := range netdev.PagePoolStatNames {
			name := "xdp_netdev_page_pool_" + metricStem(stat) + "_total"
			if v := value(t, mfs, name, "pool_id", id, "napi_id", napi, "device", dev); v != float64(p.stats[i]) {
				t.Errorf("pool %s %s = %v, want %v", id, stat, v, p.stats[i])
			}
		}
	}
}

// TestNetdevUnsupportedOnce makes page-pool-stats-get unsupported, as on a
// kernel without CONFIG_PAGE_POOL_STATS: it is logged once, asked once, and
// never fails the scrape.
func TestNetdevUnsupportedOnce(t *testing.T) {
	c, src, log := replayCollector(t, NetdevConfig{}, map[string]string{"page-pool-stats-get": ""})
	for range 3 {
		mfs := gather(t, c)
		if _, ok := mfs["xdp_netdev_page_pool_alloc_fast_total"]; ok {
			t.Fatal("page pool stats reported while unsupported")
		}
		if _, ok := mfs["xdp_netdev_page_pool_inflight_pages"]; !ok {
			t.Fatal("page-pool-get metrics lost with page-pool-stats-get")
		}
	}
	if n := src.calls[netdev.CmdPagePoolStatsGet]; n != 1 {
		t.Errorf("page-pool-stats-get asked %d times, want 1", n)
	}
	if n := strings.Count(log.String(), "CONFIG_PAGE_POOL_STATS"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, log)
	}
}

// TestNetdevDeviceFilter drops excluded devices from every family.
func TestNetdevDeviceFilter(t *testing.T) {
	c, _, _ := replayCollector(t, NetdevConfig{Filter: Filter{Devices: newDeviceFilter(nil, regexp.MustCompile("^eth0$"))}, PerQueueStats: true}, nil)
	mfs := gather(t, c)
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if labelValue(m, "device") == "eth0" {
				t.Errorf("%s still has eth0", name)
			}
		}
	}
}

// BenchmarkNetdevUpdate measures one Update against this kernel: every
// dump the kernel supports, interface names and IRQ affinity reads.
func BenchmarkNetdevUpdate(b *testing.B) {
	c := newLiveNetdev(b, NetdevConfig{PerQueueStats: true})
	b.ReportAllocs()
	for b.Loop() {
		ch := make(chan prometheus.Metric, 4096)
		if err := c.Update(context.Background(), NewLinkSnapshot(), ch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNetdevReplay measures an Update on the fixtures: reading and
// parsing the hex files plus decoding, without the kernel.
func BenchmarkNetdevReplay(b *testing.B) {
	c, _, _ := replayCollector(b, NetdevConfig{PerQueueStats: true}, nil)
	b.ReportAllocs()
	for b.Loop() {
		ch := make(chan prometheus.Metric, 4096)
		if err := c.Update(context.Background(), NewLinkSnapshot(), ch); err != nil {
			b.Fatal(err)
		}
	}
}
