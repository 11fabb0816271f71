package collector

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
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
		dev := mfs.Value(t, "xdp_netdev_qstats_"+s+"_total", "device", "eth0")
		queues, n := mfs.Sum("xdp_netdev_queue_"+s+"_total", "device", "eth0")
		if n == 0 {
			t.Errorf("no per-queue %s for eth0", s)
		}
		for what, v := range map[string]float64{"device": dev, "queue sum": queues} {
			if v < before[s] || v > after {
				t.Errorf("eth0 %s %s = %.0f, want within sysfs [%.0f, %.0f]", what, s, v, before[s], after)
			}
		}
	}
	if v := mfs.Value(t, "xdp_netdev_qstats_rx_packets_total", "device", "eth0"); v == 0 {
		t.Error("eth0 received no packets at all")
	}
	if v := mfs.Value(t, "xdp_netdev_xdp_feature", "device", "eth0", "feature", "basic"); v != 1 {
		t.Errorf("virtio_net basic XDP = %v, want 1", v)
	}
	if _, n := mfs.Sum("xdp_netdev_queue_info", "device", "eth0", "direction", "rx", "queue", "0"); n != 1 {
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
	if _, n := mfs.Sum("xdp_netdev_napi_info", "device", dev); n != 0 {
		t.Fatalf("veth without XDP has %d NAPI instances, want 0", n)
	}
	for feature, want := range map[string]float64{"basic": 1, "redirect": 1, "rx-sg": 1, "hw-offload": 0, "xsk-zerocopy": 0} {
		if v := mfs.Value(t, "xdp_netdev_xdp_feature", "device", dev, "feature", feature); v != want {
			t.Errorf("veth XDP feature %s = %v, want %v", feature, v, want)
		}
	}

	drop := vethtest.Verdict(t, "xdpt_drop", xdptest.Drop)
	l, err := link.AttachXDP(link.XDPOptions{Program: drop, Interface: pair.Host.Index})
	testenv.Check(t, err, "attaching XDP to veth")

	const n = 20_000
	vethtest.SendExactly(t, pair, n)

	mfs = gather(t, c)
	napiIDs := map[string]bool{}
	for _, m := range mfs["xdp_netdev_napi_info"].GetMetric() {
		if exportertest.Matches(m, "device", dev) {
			napiIDs[exportertest.Label(m, "napi_id")] = true
		}
	}
	if len(napiIDs) != queues {
		t.Errorf("veth with XDP has NAPI ids %v, want %d distinct", napiIDs, queues)
	}
	for _, typ := range []string{"rx", "tx"} {
		for q := range queues {
			_, got := mfs.Sum("xdp_netdev_queue_info", "device", dev, "direction", typ, "queue", strconv.Itoa(q))
			if got != 1 {
				t.Errorf("queue_info %s %d: %d series, want 1", typ, q, got)
			}
		}
	}
	// veth does not link queues to NAPIs (netif_queue_set_napi) as of 6.18;
	// when a kernel does, the ids must be the NAPIs napi-get listed.
	for _, m := range mfs["xdp_netdev_queue_info"].GetMetric() {
		if id := exportertest.Label(m, "napi_id"); exportertest.Matches(m, "device", dev) && id != "" && !napiIDs[id] {
			t.Errorf("queue_info napi_id %s is not one of the device's NAPIs %v", id, napiIDs)
		}
	}
	// veth has no netdev_stat_ops on this kernel; where it has, qstats must
	// count exactly what veth's own ethtool counters saw.
	if _, ok := mfs["xdp_netdev_qstats_rx_packets_total"]; ok {
		st := vethtest.EthtoolS(t, "", dev)
		for q := range queues {
			want := float64(st["rx_queue_"+strconv.Itoa(q)+"_xdp_packets"])
			if v := mfs.Value(t, "xdp_netdev_queue_rx_packets_total", "device", dev, "queue", strconv.Itoa(q)); v != want {
				t.Errorf("veth queue %d qstats rx-packets = %v, ethtool says %v", q, v, want)
			}
		}
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mfs = gather(t, c)
	if _, n := mfs.Sum("xdp_netdev_napi_info", "device", dev); n != 0 {
		t.Errorf("veth after detaching XDP still has %d NAPI instances", n)
	}
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

// netdevValues is a netdev.Reader of typed values. A command in
// unsupported fails as on a kernel without it (EOPNOTSUPP); calls counts
// what was asked, from the collector's concurrent dumps.
type netdevValues struct {
	devs                []netdev.Dev
	qstats, queueQstats []netdev.Qstats
	queues              []netdev.Queue
	napis               []netdev.Napi
	pools               []netdev.PagePool
	poolStats           []netdev.PoolStats
	unsupported         map[uint8]bool
	calls               [256]atomic.Int64
}

func netdevAnswer[T any](v *netdevValues, cmd uint8, values []T) ([]T, error) {
	v.calls[cmd].Add(1)
	if v.unsupported[cmd] {
		return nil, fmt.Errorf("%s: %w", netdev.CmdNames[cmd], unix.EOPNOTSUPP)
	}
	return values, nil
}

func (v *netdevValues) Devs() ([]netdev.Dev, error) { return netdevAnswer(v, netdev.CmdDevGet, v.devs) }
func (v *netdevValues) Qstats(perQueue bool) ([]netdev.Qstats, error) {
	if perQueue {
		return netdevAnswer(v, netdev.CmdQstatsGet, v.queueQstats)
	}
	return netdevAnswer(v, netdev.CmdQstatsGet, v.qstats)
}
func (v *netdevValues) Queues() ([]netdev.Queue, error) {
	return netdevAnswer(v, netdev.CmdQueueGet, v.queues)
}
func (v *netdevValues) Napis() ([]netdev.Napi, error) {
	return netdevAnswer(v, netdev.CmdNapiGet, v.napis)
}
func (v *netdevValues) PagePools() ([]netdev.PagePool, error) {
	return netdevAnswer(v, netdev.CmdPagePoolGet, v.pools)
}
func (v *netdevValues) PagePoolStats() ([]netdev.PoolStats, error) {
	return netdevAnswer(v, netdev.CmdPagePoolStatsGet, v.poolStats)
}
func (*netdevValues) Close() error { return nil }

// qstatsOf is a Qstats with the named values present.
func qstatsOf(ifindex uint32, perQueue bool, typ, queue uint32, values map[string]uint64) netdev.Qstats {
	s := netdev.Qstats{Ifindex: ifindex, PerQueue: perQueue, QueueType: typ, QueueID: queue}
	for i, name := range netdev.QstatNames {
		if v, ok := values[name]; ok {
			s.Values[i], s.Present[i] = v, true
		}
	}
	return s
}

// testNetdev is eth0 (ifindex 4) of a two-channel NIC whose driver links
// each queue to a NAPI with its IRQ (netif_napi_set_irq), with a page pool
// per RX queue and an orphaned pool (its netdev gone), and lo.
func testNetdev() *netdevValues {
	v := &netdevValues{
		devs: []netdev.Dev{{Ifindex: 1, HasRxMetadata: true}, {Ifindex: 4, XDPFeatures: 0x2b | 1<<40, XDPZCMaxSegs: 1, HasZCMaxSegs: true}},
		qstats: []netdev.Qstats{qstatsOf(4, false, 0, 0, map[string]uint64{
			"rx-packets": 10361, "rx-bytes": 199297415, "tx-packets": 9471, "tx-bytes": 970481, "rx-hw-drops": 17, "tx-stop": 0})},
		queueQstats: []netdev.Qstats{
			qstatsOf(4, true, 0, 0, map[string]uint64{"rx-packets": 6000, "rx-bytes": 100000000}),
			qstatsOf(4, true, 0, 1, map[string]uint64{"rx-packets": 4361, "rx-bytes": 99297415}),
			qstatsOf(4, true, 1, 0, map[string]uint64{"tx-packets": 9471}),
		},
		pools: []netdev.PagePool{
			{ID: 7, NapiID: 8193, Inflight: 1024, InflightMem: 1024 * 4096, Ifindex: 4},
			{ID: 8, NapiID: 8194, Inflight: 1536, InflightMem: 1536 * 4096, Ifindex: 4},
			{ID: 3, Inflight: 2, InflightMem: 2 * 4096, Detached: true},
		},
		poolStats: []netdev.PoolStats{
			{ID: 7, Ifindex: 4, Values: [...]uint64{52341234, 1024, 0, 3, 812, 0, 50011223, 120, 2330011, 4, 12}},
			{ID: 8, Ifindex: 4, Values: [...]uint64{7_000_000_000, 1536, 0, 1, 2, 0, 6_999_000_000, 0, 998_000, 0, 0}},
		},
	}
	for i := range v.poolStats {
		for j := range v.poolStats[i].Present {
			v.poolStats[i].Present[j] = true
		}
	}
	for q, irq := range []uint32{41, 42} {
		napi := 8193 + uint32(q)
		v.napis = append(v.napis, netdev.Napi{Ifindex: 4, ID: napi, IRQ: irq, HasIRQ: true,
			DeferHardIRQs: 2, HasDeferHardIRQs: true, GROFlushTimeoutNs: 200_000, HasGROFlushTimeout: true})
		for typ := range uint32(2) {
			v.queues = append(v.queues, netdev.Queue{Ifindex: 4, ID: uint32(q), QueueType: typ, NapiID: napi})
		}
	}
	v.queues = append(v.queues, netdev.Queue{Ifindex: 1, ID: 0, QueueType: 0})
	return v
}

// valuesCollector is the netdev collector on v, with IRQ affinity from
// procFS, seeing eth0Links.
func valuesCollector(cfg NetdevConfig, v *netdevValues) (Collector, *bytes.Buffer) {
	var log bytes.Buffer
	return onLinks{newNetdevCollector(cfg, slog.New(slog.NewTextHandler(&log, nil)), v), eth0Links()}, &log
}

// fakeProcIRQ writes /proc/irq/N/{smp,effective}_affinity_list.
func fakeProcIRQ(t *testing.T, affinity map[string][2]string) string {
	procFS := t.TempDir()
	for irq, cpus := range affinity {
		dir := filepath.Join(procFS, "irq", irq)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, v := range map[string]string{"smp_affinity_list": cpus[0], "effective_affinity_list": cpus[1]} {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return procFS
}

// TestNetdevMetrics maps every command's values: qstats per device and
// per queue (only those the driver reports), XDP features (and a bit no
// name is known for), queues joined to their NAPI, IRQ and its CPUs, page
// pools with and without a device.
func TestNetdevMetrics(t *testing.T) {
	v := testNetdev()
	c, _ := valuesCollector(NetdevConfig{PerQueueStats: true, ProcFS: fakeProcIRQ(t, map[string][2]string{"41": {"0-3", "2"}, "42": {"0-3", "3"}})}, v)
	mfs := gather(t, c)
	for name, want := range map[string]float64{
		"xdp_netdev_qstats_rx_packets_total": 10361, "xdp_netdev_qstats_rx_bytes_total": 199297415,
		"xdp_netdev_qstats_tx_packets_total": 9471, "xdp_netdev_qstats_rx_hw_drops_total": 17, "xdp_netdev_qstats_tx_stop_total": 0,
	} {
		if got := mfs.Value(t, name, "device", "eth0"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if _, ok := mfs["xdp_netdev_qstats_rx_alloc_fail_total"]; ok {
		t.Error("a qstat the driver does not report has a series")
	}
	if got := mfs.Value(t, "xdp_netdev_queue_rx_packets_total", "device", "eth0", "queue", "1", "direction", "rx"); got != 4361 {
		t.Errorf("eth0 rx queue 1 packets = %v", got)
	}
	for feature, want := range map[string]float64{"basic": 1, "redirect": 1, "ndo-xmit": 0, "xsk-zerocopy": 1, "rx-sg": 1, "0x10000000000": 1} {
		if got := mfs.Value(t, "xdp_netdev_xdp_feature", "device", "eth0", "feature", feature); got != want {
			t.Errorf("eth0 feature %s = %v, want %v", feature, got, want)
		}
	}
	if _, n := mfs.Sum("xdp_netdev_xsk_feature", "device", "lo"); n != 0 {
		t.Error("lo reports xsk features it has no attribute for")
	}
	for q, cpu := range []string{"2", "3"} {
		queue, napi, irq := strconv.Itoa(q), strconv.Itoa(8193+q), strconv.Itoa(41+q)
		if got := mfs.Value(t, "xdp_netdev_queue_info", "device", "eth0", "queue", queue, "direction", "rx",
			"napi_id", napi, "irq", irq); got != 1 {
			t.Errorf("queue %s info = %v", queue, got)
		}
		if got := mfs.Value(t, "xdp_netdev_irq_affinity_info", "device", "eth0", "irq", irq, "cpus", "0-3", "effective_cpus", cpu); got != 1 {
			t.Errorf("IRQ %s affinity = %v", irq, got)
		}
		if got := mfs.Value(t, "xdp_netdev_napi_gro_flush_timeout_seconds", "napi_id", napi); got != 200e-6 {
			t.Errorf("gro flush timeout = %v", got)
		}
	}
	if got := mfs.Value(t, "xdp_netdev_queue_info", "device", "lo", "queue", "0", "napi_id", "", "irq", ""); got != 1 {
		t.Errorf("lo queue info = %v", got)
	}
	if _, n := mfs.Sum("xdp_netdev_irq_affinity_info", "device", "lo"); n != 0 {
		t.Error("lo, whose queue has no IRQ, has IRQ affinity series")
	}
	for _, p := range v.pools {
		id, dev := strconv.FormatUint(p.ID, 10), ""
		if p.Ifindex != 0 {
			dev = "eth0"
		}
		if got := mfs.Value(t, "xdp_netdev_page_pool_inflight_pages", "pool_id", id, "device", dev); got != float64(p.Inflight) {
			t.Errorf("pool %s inflight = %v, want %v", id, got, p.Inflight)
		}
		switch detached := mfs.Series("xdp_netdev_page_pool_detached", "pool_id", id); {
		case p.Detached && (len(detached) != 1 || detached[0].GetGauge().GetValue() != 1):
			t.Errorf("detached pool %s: %v, want one series of 1", id, detached)
		case !p.Detached && len(detached) != 0:
			t.Errorf("attached pool %s has a detached series: %v", id, detached)
		}
	}
	for _, s := range v.poolStats {
		id := strconv.FormatUint(s.ID, 10)
		for i, stat := range netdev.PagePoolStatNames {
			w, ok := pagePoolSeries[stat]
			if !ok {
				t.Fatalf("no expected series for page-pool-stats-get %s", stat)
			}
			if got := mfs.Value(t, w[0], "pool_id", id, "device", "eth0", w[1], w[2]); got != float64(s.Values[i]) {
				t.Errorf("pool %s %s = %v, want %v", id, stat, got, s.Values[i])
			}
		}
	}
}

// TestNetdevUnsupportedOnce makes page-pool-stats-get unsupported, as on a
// kernel without CONFIG_PAGE_POOL_STATS: it is logged once, asked once, and
// never fails the scrape.
func TestNetdevUnsupportedOnce(t *testing.T) {
	v := testNetdev()
	v.unsupported = map[uint8]bool{netdev.CmdPagePoolStatsGet: true}
	c, log := valuesCollector(NetdevConfig{}, v)
	for range 3 {
		mfs := gather(t, c)
		if _, ok := mfs["xdp_netdev_page_pool_allocations_total"]; ok {
			t.Fatal("page pool stats reported while unsupported")
		}
		if _, ok := mfs["xdp_netdev_page_pool_inflight_pages"]; !ok {
			t.Fatal("page-pool-get metrics lost with page-pool-stats-get")
		}
	}
	if n := v.calls[netdev.CmdPagePoolStatsGet].Load(); n != 1 {
		t.Errorf("page-pool-stats-get asked %d times, want 1", n)
	}
	if n := strings.Count(log.String(), "CONFIG_PAGE_POOL_STATS"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, log)
	}
}

// TestNetdevDeviceFilter drops excluded devices from every family.
func TestNetdevDeviceFilter(t *testing.T) {
	c, _ := valuesCollector(NetdevConfig{Filter: Filter{Devices: newDeviceFilter(nil, regexp.MustCompile("^eth0$"))}, PerQueueStats: true}, testNetdev())
	mfs := gather(t, c)
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if exportertest.Label(m, "device") == "eth0" {
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

// pagePoolSeries is the series each page-pool-stats-get attribute is
// sent as: family, label and value, in the shape of the nic collector's
// xdp_nic_rx_page_pool_* families (the same path and result values).
var pagePoolSeries = map[string][3]string{
	"alloc-fast":              {"xdp_netdev_page_pool_allocations_total", "path", "fast"},
	"alloc-slow":              {"xdp_netdev_page_pool_allocations_total", "path", "slow"},
	"alloc-slow-high-order":   {"xdp_netdev_page_pool_allocations_total", "path", "slow_high_order"},
	"alloc-empty":             {"xdp_netdev_page_pool_allocations_total", "path", "empty"},
	"alloc-refill":            {"xdp_netdev_page_pool_allocations_total", "path", "refill"},
	"alloc-waive":             {"xdp_netdev_page_pool_allocations_total", "path", "waive"},
	"recycle-cached":          {"xdp_netdev_page_pool_recycles_total", "result", "cached"},
	"recycle-cache-full":      {"xdp_netdev_page_pool_recycles_total", "result", "cache_full"},
	"recycle-ring":            {"xdp_netdev_page_pool_recycles_total", "result", "ring"},
	"recycle-ring-full":       {"xdp_netdev_page_pool_recycles_total", "result", "ring_full"},
	"recycle-released-refcnt": {"xdp_netdev_page_pool_recycles_total", "result", "released_ref"},
}
