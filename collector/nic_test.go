package collector

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolname"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolnl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// nicFamilies are the families of the NIC signals.
var nicFamilies = []string{"xdp_nic_port_packets_total", "xdp_nic_port_bytes_total", "xdp_nic_rx_host_drops_total",
	"xdp_nic_rx_alloc_failures_total", "xdp_nic_allowance_exceeded_packets_total"}

// nicSeries is every NIC signal sample of device, keyed by family and
// labels but device, as "family{name=value,...}", with the source and
// (but for the port families) the stat of its xdp_nic_signal_source_info
// series as labels. A signal series without exactly one source series, or
// a source series of no signal series, is an error.
func nicSeries(t *testing.T, mfs exportertest.Families, device string) map[string]float64 {
	t.Helper()
	sources := map[string][]string{}
	for _, m := range mfs.Series("xdp_nic_signal_source_info", "device", device) {
		l := func(n string) string { return exportertest.Label(m, n) }
		key := l("family") + "{" + l("direction") + "," + l("where") + "}"
		if _, dup := sources[key]; dup {
			t.Errorf("%s: two source series of %s", device, key)
		}
		sources[key] = []string{"source=" + l("source"), "stat=" + l("stat")}
	}
	out := map[string]float64{}
	for _, fam := range nicFamilies {
		for _, m := range mfs.Series(fam, "device", device) {
			ls := labelsBut(m, "device")
			if fam != "xdp_nic_allowance_exceeded_packets_total" {
				key := fam + "{" + exportertest.Label(m, "direction") + "," + exportertest.Label(m, "where") + "}"
				src, ok := sources[key]
				if !ok {
					t.Errorf("%s: no source series of %s", device, key)
				}
				delete(sources, key)
				if strings.HasPrefix(fam, "xdp_nic_port_") && len(src) == 2 {
					src = src[:1]
				}
				ls = append(ls, src...)
				slices.Sort(ls)
			}
			out[fam+"{"+strings.Join(ls, ",")+"}"] = exportertest.Value(m)
		}
	}
	for key := range sources {
		t.Errorf("%s: a source series of %s, which is not sent", device, key)
	}
	return out
}

// rawNICSeries is every sample of device in fams, keyed as
// "family{name=value<US>...}" with the labels as sent, but device: the
// unit separator because a stat label lists its stats with commas.
func rawNICSeries(mfs exportertest.Families, device string, fams ...string) map[string]float64 {
	out := map[string]float64{}
	for _, fam := range fams {
		for _, m := range mfs.Series(fam, "device", device) {
			out[fam+"{"+strings.Join(labelsBut(m, "device"), unitSep)+"}"] = exportertest.Value(m)
		}
	}
	return out
}

// unitSep separates the labels of a rawNICSeries key.
const unitSep = "\x1f"

// labelsBut is the sample's labels but skip, as name=value.
func labelsBut(m *dto.Metric, skip string) []string {
	var ls []string
	for _, p := range m.GetLabel() {
		if p.GetName() != skip {
			ls = append(ls, p.GetName()+"="+p.GetValue())
		}
	}
	return ls
}

func checkNIC(t *testing.T, mfs exportertest.Families, device string, want map[string]float64) {
	t.Helper()
	got := nicSeries(t, mfs, device)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := got[k]; !ok || v != want[k] {
			t.Errorf("%s: %s = %v (present %v), want %v", device, k, v, ok, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s = %v", device, k, got[k])
		}
	}
}

// port, hostDrop and alloc build the keys of nicSeries.
func port(fam, dir, src string) string {
	return "xdp_nic_port_" + fam + "_total{direction=" + dir + ",source=" + src + "}"
}
func hostDrop(src, stat, where string) string {
	if where == "" {
		return "xdp_nic_rx_host_drops_total{source=" + src + ",stat=" + stat + "}"
	}
	return "xdp_nic_rx_host_drops_total{source=" + src + ",stat=" + stat + ",where=" + where + "}"
}
func alloc(src, stat string) string {
	return "xdp_nic_rx_alloc_failures_total{source=" + src + ",stat=" + stat + "}"
}

// TestNICSignalFixtures reads the signals of every captured driver dump:
// each equals the dump's own counters, summed where the driver splits
// one (i40e's and ice's unicast, multicast and broadcast packets, bnxt's
// rings, vmxnet3's queue blocks). A dump holds no standard counter, so
// every signal comes from the driver's names; virtio_net and gve have no
// port counters, and the virtio_net dump no drop counter. The e1000e and
// vmxnet3 dumps are QEMU's emulations flooded by kernelmatrix's
// TestEmulatedNICs: 20,000 frames each, 296 of them dropped on vmxnet3's
// full ring.
func TestNICSignalFixtures(t *testing.T) {
	src := loadFixtures(t, "mlx5", "i40e", "ice", "ixgbe", "bnxt", "virtio_net", "igb", "gve", "e1000e", "vmxnet3")
	mfs := gather(t, fixtureCollector(t, src, "", "", nil))
	e := srcEthtool
	for dev, want := range map[string]map[string]float64{
		"mlx5": {port("packets", "rx", e): 88243138, port("packets", "tx", e): 1739707,
			port("bytes", "rx", e): 5647560737, port("bytes", "tx", e): 111340650,
			hostDrop(e, "rx_discards_phy", "port"): 14635008, hostDrop(e, "rx_out_of_buffer", "ring"): 43246222},
		"i40e": {port("packets", "rx", e): 258200655577 + 25774301 + 56182126, port("packets", "tx", e): 765693443487 + 853250 + 323,
			port("bytes", "rx", e): 263842031063331, port("bytes", "tx", e): 161388396404331,
			hostDrop(e, "port.rx_dropped", "port"): 0, alloc(e, "rx_alloc_fail,rx_pg_alloc_fail"): 0},
		"ice": {port("packets", "rx", e): 33003654962 + 68400061 + 329643106, port("packets", "tx", e): 34495741329 + 1052558 + 54,
			port("bytes", "rx", e): 14645706706667, port("bytes", "tx", e): 25121483762164,
			hostDrop(e, "rx_dropped.nic", "port"): 0, hostDrop(e, "rx_dropped", "ring"): 3,
			alloc(e, "rx_alloc_fail,rx_pg_alloc_fail"): 0},
		"ixgbe": {port("packets", "rx", e): 514913553697, port("packets", "tx", e): 459844200842,
			port("bytes", "rx", e): 314224148414349, port("bytes", "tx", e): 137594905353510,
			hostDrop(e, "rx_missed_errors", "port"): 0, hostDrop(e, "rx_no_dma_resources", "ring"): 236,
			alloc(e, "alloc_rx_buff_failed,alloc_rx_page_failed"): 0},
		"bnxt": {port("packets", "rx", e): 3400498238, port("packets", "tx", e): 47792694822,
			port("bytes", "rx", e): 7258696030461, port("bytes", "tx", e): 15434985234825,
			hostDrop(e, "rx_stat_discard", "port"): 14, hostDrop(e, "[%u]: rx_discards", "ring"): 0},
		"igb": {port("packets", "rx", e): 666, port("packets", "tx", e): 13, port("bytes", "rx", e): 999000, port("bytes", "tx", e): 19500,
			hostDrop(e, "rx_missed_errors", "port"): 0, hostDrop(e, "rx_queue_%u_drops", "ring"): 0, alloc(e, "rx_queue_%u_alloc_failed"): 0},
		"gve": {hostDrop(e, "rx_no_buffers_posted[%u]", "ring"): 0, alloc(e, "rx_buf_alloc_fail,rx_skb_alloc_fail"): 0},
		"e1000e": {port("packets", "rx", e): 20000, port("packets", "tx", e): 0, port("bytes", "rx", e): 1280000, port("bytes", "tx", e): 0,
			hostDrop(e, "rx_missed_errors", "port"): 0, alloc(e, "alloc_rx_buff_failed,rx_dma_failed"): 0},
		"vmxnet3": {port("packets", "rx", e): 19704, port("packets", "tx", e): 0, port("bytes", "rx", e): 1182240, port("bytes", "tx", e): 0,
			hostDrop(e, "pkts rx OOB", "ring"): 296, alloc(e, "rx buf alloc fail"): 0},
		"virtio_net": {},
	} {
		checkNIC(t, mfs, dev, want)
	}
	// A signal's stats are not also raw series.
	for _, name := range []string{"xdp_nic_stat_port_rx_unicast", "xdp_nic_stat_rx_discards_phy", "xdp_nic_queue_stat_rx_discards",
		"xdp_nic_stat_rx_pkts_nic", "xdp_nic_queue_stat_rx_no_buffers_posted"} {
		if _, ok := mfs[name]; ok {
			t.Errorf("%s exported although its stat feeds a NIC signal", name)
		}
	}
}

// sourceNames are stats of drivers no public dump was found for, written
// as their sources (driverTables) define them, "%u" for the queue, with
// neighbours that feed nothing; each value is its position from 1.
var sourceNames = map[string][]string{
	"mlx4_en": {"rx_packets", "rx_dropped", "rx_fifo_errors", "rx_missed_errors", "rx_alloc_pages",
		"rx_packets_phy", "rx_bytes_phy", "tx_packets_phy", "tx_bytes_phy"},
	"igc": {"rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_no_buffer_count", "rx_missed_errors",
		"rx_queue_%u_packets", "rx_queue_%u_drops", "rx_queue_%u_alloc_failed"},
	"ena": {"tx_timeout", "bw_in_allowance_exceeded", "bw_out_allowance_exceeded", "pps_allowance_exceeded",
		"conntrack_allowance_exceeded", "linklocal_allowance_exceeded", "queue_%u_rx_cnt",
		"queue_%u_rx_page_alloc_fail", "queue_%u_rx_skb_alloc_fail", "queue_%u_rx_dma_mapping_err", "queue_%u_rx_empty_rx_ring"},
	"idpf": {"rx-csum_errors", "rx-unicast_pkts", "rx-multicast_pkts", "rx-broadcast_pkts",
		"tx-unicast_pkts", "tx-multicast_pkts", "tx-broadcast_pkts"},
	"nfp": {"dev_rx_discards", "dev_rx_pkts", "rx_replace_buf_alloc_fail", "mac.rx_octets", "mac.rx_drop_events",
		"mac.rx_frames_received_ok", "mac.tx_octets", "mac.tx_frames_transmitted_ok"},
	"sfc": {"rx_noskb_drops", "rx_nodesc_trunc", "port_tx_bytes", "port_tx_packets", "port_rx_bytes", "port_rx_packets",
		"port_rx_overflow", "port_rx_nodesc_drops"},
	"e1000e": {"rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_no_buffer_count", "rx_missed_errors",
		"alloc_rx_buff_failed", "rx_dma_failed"},
	// One block of names per queue, the same names each time.
	"vmxnet3": {"Tx Queue#", "  ucast pkts tx", "  mcast pkts tx", "  bcast pkts tx", "  ucast bytes tx", "  mcast bytes tx", "  bcast bytes tx",
		"Rx Queue#", "  ucast pkts rx", "  mcast pkts rx", "  bcast pkts rx", "  ucast bytes rx", "  mcast bytes rx", "  bcast bytes rx",
		"  pkts rx OOB", "  rx buf alloc fail",
		"Rx Queue#", "  ucast pkts rx", "  mcast pkts rx", "  bcast pkts rx", "  ucast bytes rx", "  mcast bytes rx", "  bcast bytes rx",
		"  pkts rx OOB", "  rx buf alloc fail"},
}

// sourceDev is a device of driver with sourceNames' stats, a per-queue
// name for queues 0 and 1.
func sourceDev(driver string) *fixtureDev {
	d := &fixtureDev{}
	d.info.Driver = driver
	for _, n := range sourceNames[driver] {
		for q := range 2 {
			name := strings.Replace(n, "%u", fmt.Sprint(q), 1)
			d.names = append(d.names, name)
			d.vals = append(d.vals, uint64(len(d.names)))
			if name == n {
				break
			}
		}
	}
	d.info.NStats = len(d.names)
	return d
}

// TestNICSignalSourceNames reads the signals of the drivers with no
// public dump from the names their sources define.
func TestNICSignalSourceNames(t *testing.T) {
	devs := map[string]*fixtureDev{}
	for drv := range sourceNames {
		devs[drv] = sourceDev(drv)
	}
	mfs := gather(t, fixtureCollector(t, newFixtureSource(devs), "", "", nil))
	e := srcEthtool
	a := func(name string) string {
		return "xdp_nic_allowance_exceeded_packets_total{allowance=" + name + "}"
	}
	for dev, want := range map[string]map[string]float64{
		"mlx4_en": {hostDrop(e, "rx_fifo_errors", "port"): 3, port("packets", "rx", e): 6, port("bytes", "rx", e): 7, port("packets", "tx", e): 8, port("bytes", "tx", e): 9},
		// rx_queue_0/1_drops are stats 9 and 10, alloc_failed 11 and 12.
		"igc": {port("packets", "rx", e): 1, port("packets", "tx", e): 2, port("bytes", "rx", e): 3, port("bytes", "tx", e): 4,
			hostDrop(e, "rx_missed_errors", "port"): 6, hostDrop(e, "rx_queue_%u_drops", "ring"): 9 + 10, alloc(e, "rx_queue_%u_alloc_failed"): 11 + 12},
		// Allowances 2..6; the queues' alloc failures 9+10, 11+12, 13+14.
		"ena": {a("bw_in"): 2, a("bw_out"): 3, a("pps"): 4, a("conntrack"): 5, a("linklocal"): 6,
			alloc(e, "queue_%u_rx_dma_mapping_err,queue_%u_rx_page_alloc_fail,queue_%u_rx_skb_alloc_fail"): 9 + 10 + 11 + 12 + 13 + 14},
		"idpf": {port("packets", "rx", e): 2 + 3 + 4, port("packets", "tx", e): 5 + 6 + 7},
		"nfp": {hostDrop(e, "dev_rx_discards", "ring"): 1, alloc(e, "rx_replace_buf_alloc_fail"): 3, port("bytes", "rx", e): 4,
			hostDrop(e, "mac.rx_drop_events", "port"): 5, port("packets", "rx", e): 6, port("bytes", "tx", e): 7, port("packets", "tx", e): 8},
		"sfc": {alloc(e, "rx_noskb_drops"): 1, hostDrop(e, "port_rx_nodesc_drops,rx_nodesc_trunc", "ring"): 2 + 8, port("bytes", "tx", e): 3, port("packets", "tx", e): 4,
			port("bytes", "rx", e): 5, port("packets", "rx", e): 6, hostDrop(e, "port_rx_overflow", "port"): 7},
		"e1000e": {port("packets", "rx", e): 1, port("packets", "tx", e): 2, port("bytes", "rx", e): 3, port("bytes", "tx", e): 4,
			hostDrop(e, "rx_missed_errors", "port"): 6, alloc(e, "alloc_rx_buff_failed,rx_dma_failed"): 7 + 8},
		// The TX block is stats 1..7, the RX queues 8..16 and 17..25.
		"vmxnet3": {port("packets", "tx", e): 2 + 3 + 4, port("bytes", "tx", e): 5 + 6 + 7,
			port("packets", "rx", e): 9 + 10 + 11 + 18 + 19 + 20, port("bytes", "rx", e): 12 + 13 + 14 + 21 + 22 + 23,
			hostDrop(e, "pkts rx OOB", "ring"): 15 + 24, alloc(e, "rx buf alloc fail"): 16 + 25},
	} {
		checkNIC(t, mfs, dev, want)
	}
}

// TestNICStandardPrecedence gives the devices standard counters: mlx5's
// eth-mac frames (not octets) and qstats rx-alloc-fail take the place of
// its names for those signals alone, its drops stay its names' though
// qstats has overruns; virtio_net, naming no drop, takes qstats overruns;
// idpf and veth take their table's rtnl_link_stats64 field, rx_dropped,
// and a driver with no table rx_missed_errors.
func TestNICStandardPrecedence(t *testing.T) {
	src := loadFixtures(t, "mlx5", "virtio_net")
	src.set("idpf", sourceDev("idpf"))
	src.set("veth", loadFixture(t, "testdata/ethtool/veth.txt"))
	unknown := loadFixture(t, "testdata/ethtool/veth.txt")
	unknown.info.Driver = "8139cp"
	src.set("rtl", unknown)
	mlx5, virtio, idpf, veth, rtl := src.index["mlx5"], src.index["virtio_net"], src.index["idpf"], src.index["veth"], src.index["rtl"]
	var mac ethtoolnl.MAC
	mac.Ifindex, mac.Values[ethtoolnl.FramesReceivedOK], mac.Present[ethtoolnl.FramesReceivedOK] = uint32(mlx5), 88243140, true
	src.std.mac = []ethtoolnl.MAC{mac, {Ifindex: uint32(virtio)}}
	q := func(ifindex int, stat int, v uint64) netdev.Qstats {
		s := netdev.Qstats{Ifindex: uint32(ifindex)}
		s.Values[stat], s.Present[stat] = v, true
		return s
	}
	mq := q(mlx5, qstatAllocFail, 17)
	mq.Values[qstatDropOverruns], mq.Present[qstatDropOverruns] = 5, true
	src.std.qstats = []netdev.Qstats{mq, q(virtio, qstatDropOverruns, 23)}
	link := func(ifindex int, missed, dropped uint64) rtnl.LinkStats {
		s := rtnl.LinkStats{Index: uint32(ifindex), N: len(rtnl.Stats64Names)}
		s.Values[6], s.Values[15] = dropped, missed // rx_dropped, rx_missed_errors
		return s
	}
	src.std.link = []rtnl.LinkStats{link(mlx5, 99, 98), link(virtio, 31, 30), link(idpf, 41, 40), link(veth, 0, 7), link(rtl, 12, 11)}
	mfs := gather(t, fixtureCollector(t, src, "", "", nil))
	e := srcEthtool
	want := map[string]float64{port("packets", "rx", srcEthMAC): 88243140, port("packets", "tx", e): 1739707,
		port("bytes", "rx", e): 5647560737, port("bytes", "tx", e): 111340650,
		hostDrop(e, "rx_discards_phy", "port"): 14635008, hostDrop(e, "rx_out_of_buffer", "ring"): 43246222,
		alloc(srcQstats, "rx-alloc-fail"): 17}
	checkNIC(t, mfs, "mlx5", want)
	checkNIC(t, mfs, "virtio_net", map[string]float64{hostDrop(srcQstats, "rx-hw-drop-overruns", ""): 23})
	checkNIC(t, mfs, "idpf", map[string]float64{port("packets", "rx", e): 2 + 3 + 4, port("packets", "tx", e): 5 + 6 + 7,
		hostDrop(srcStats64, "rx_dropped", ""): 40})
	checkNIC(t, mfs, "veth", map[string]float64{hostDrop(srcStats64, "rx_dropped", ""): 7})
	checkNIC(t, mfs, "rtl", map[string]float64{hostDrop(srcStats64, "rx_missed_errors", ""): 12})
}

// TestNICStandardUnsupported: a kernel without eth-mac statistics (before
// 5.13) or qstats (before 6.9) is said once at info, is no failure, and
// is not asked again; a standard source that fails is the collector's
// error while the rest of the scrape goes on.
func TestNICStandardUnsupported(t *testing.T) {
	src := loadFixtures(t, "mlx5")
	src.std.macErr = fmt.Errorf("%w (no STATS_GET)", ethtoolnl.ErrNoStats)
	src.std.qstatsErr = fmt.Errorf("%w: no qstats-get", errors.ErrUnsupported)
	var log bytes.Buffer
	c := fixtureCollector(t, src, "", "", slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for range 2 {
		mfs := gather(t, c)
		if v := mfs.Value(t, "xdp_nic_port_packets_total", "device", "mlx5", "direction", "rx"); v != 88243138 {
			t.Errorf("port packets without eth-mac: %v, want the driver's 88243138", v)
		}
	}
	if n := strings.Count(log.String(), "not supported by this kernel"); n != 2 {
		t.Errorf("%d info lines for two unsupported sources over two scrapes, want 2:\n%s", n, log.String())
	}
	if src.count("MACStats", "") != 1 || src.count("Qstats", "") != 1 || src.count("LinkStats", "") != 2 {
		t.Errorf("calls: MACStats %d, Qstats %d, LinkStats %d; want 1, 1 (unsupported: asked once), 2",
			src.count("MACStats", ""), src.count("Qstats", ""), src.count("LinkStats", ""))
	}

	src.std.linkErr = errors.New("netlink: no buffer space")
	mfs, err := gatherErr(t, fixtureCollector(t, src, "", "", nil))
	if err == nil || !strings.Contains(err.Error(), "rtnl_link_stats64") {
		t.Errorf("a failing rtnl_link_stats64 dump: %v, want the collector's error", err)
	}
	if _, n := mfs.Sum("xdp_nic_rx_host_drops_total", "device", "mlx5"); n != 2 {
		t.Errorf("mlx5's named drops after a failed link dump: %d series, want 2", n)
	}
}

// TestNICIdleStandardSources: a standard source that has no counter for
// any selected device (veths have no eth-mac statistics) is asked again
// only when the devices change or the settings interval has passed; one
// that has (a veth's rtnl_link_stats64) every scrape.
func TestNICIdleStandardSources(t *testing.T) {
	src := newFixtureSource(map[string]*fixtureDev{"veth": loadFixture(t, "testdata/ethtool/veth.txt")})
	src.std.mac = []ethtoolnl.MAC{{Ifindex: uint32(src.index["veth"])}}
	src.std.link = []rtnl.LinkStats{{Index: uint32(src.index["veth"]), N: len(rtnl.Stats64Names)}}
	c := fixtureCollector(t, src, "", "", nil)
	c.settings = time.Minute
	now := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return now }
	calls := func(when string, mac, link int) {
		t.Helper()
		gather(t, c)
		if m, l := src.count("MACStats", ""), src.count("LinkStats", ""); m != mac || l != link {
			t.Errorf("%s: %d eth-mac and %d rtnl_link_stats64 dumps, want %d and %d", when, m, l, mac, link)
		}
	}
	calls("first scrape", 1, 1)
	now = now.Add(59 * time.Second)
	calls("within the interval", 1, 2)
	now = now.Add(time.Second)
	calls("after the interval", 2, 3)

	mlx5 := loadFixture(t, "testdata/ethtool/mlx5.txt")
	src.set("mlx5", mlx5)
	var mac ethtoolnl.MAC
	mac.Ifindex, mac.Values[ethtoolnl.FramesReceivedOK], mac.Present[ethtoolnl.FramesReceivedOK] = uint32(src.index["mlx5"]), 7, true
	src.mu.Lock()
	src.std.mac = append(src.std.mac, mac)
	src.mu.Unlock()
	calls("a device more", 3, 4)
	calls("the next scrape", 4, 5)
	if v := gather(t, c).Value(t, "xdp_nic_port_packets_total", "device", "mlx5", "direction", "rx"); v != 7 {
		t.Errorf("mlx5's eth-mac frames: %v, want 7", v)
	}
}

// TestDriverTables holds the tables to what the collector can read: every
// per-queue name parses as a queue's, no device-wide name does, no driver
// is listed twice, and each table cites its source.
func TestDriverTables(t *testing.T) {
	seen := map[string]bool{}
	for _, tab := range driverTables {
		if tab.source == "" {
			t.Errorf("%v: no source file", tab.drivers)
		}
		for _, d := range tab.drivers {
			if seen[d] {
				t.Errorf("driver %s in two tables", d)
			}
			seen[d] = true
		}
		idx := driverIndexes[tab.drivers[0]]
		if got := len(idx.perQueue) + len(idx.device); got != len(tab.stats) {
			t.Errorf("%v: %d of %d names indexed", tab.drivers, got, len(tab.stats))
		}
		for _, s := range tab.stats {
			_, _, perQueue := ethtoolname.ParseQueue(strings.Replace(s.name, "%u", "3", 1))
			if perQueue != strings.Contains(s.name, "%u") {
				t.Errorf("%v: %q parses as per-queue %v", tab.drivers, s.name, perQueue)
			}
		}
	}
}

// fixtureStandard is what the standard sources answer, errors included.
type fixtureStandard struct {
	mac                        []ethtoolnl.MAC
	qstats                     []netdev.Qstats
	link                       []rtnl.LinkStats
	pause                      []ethtoolnl.Pause
	fec                        []ethtoolnl.FEC
	macErr, qstatsErr, linkErr error
	pauseErr, fecErr           error
}

// standard counts a call to a standard source and answers it.
func standard[T any](s *fixtureSource, call string, values []T, err error) ([]T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[call+" "]++
	return values, err
}

func (s *fixtureSource) MACStats() ([]ethtoolnl.MAC, error) {
	return standard(s, "MACStats", s.std.mac, s.std.macErr)
}
func (s *fixtureSource) Qstats() ([]netdev.Qstats, error) {
	return standard(s, "Qstats", s.std.qstats, s.std.qstatsErr)
}
func (s *fixtureSource) FECStats() ([]ethtoolnl.FEC, error) {
	return standard(s, "FECStats", s.std.fec, s.std.fecErr)
}
func (s *fixtureSource) LinkStats() ([]rtnl.LinkStats, error) {
	return standard(s, "LinkStats", s.std.link, s.std.linkErr)
}

// TestQstatIndexes: the NIC signals' qstat indexes name the stats they
// read in netdev's list.
func TestQstatIndexes(t *testing.T) {
	for i, want := range map[int]string{qstatAllocFail: qstatAllocFailName, qstatDropOverruns: qstatOverrunsName} {
		if got := netdev.QstatNames[i]; got != want {
			t.Errorf("index %d is %s in netdev.QstatNames, want %s", i, got, want)
		}
	}
}
