package collector

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolname"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// fixtureCollector is the ethtool collector on src with the families
// that --collector.nic.metrics-include and -exclude select.
func fixtureCollector(t testing.TB, src ethtoolSource, include, exclude string, logger *slog.Logger) *ethtoolCollector {
	t.Helper()
	fams, err := newFamilyFilter("nic", regexp.MustCompile(include), regexp.MustCompile(exclude), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := EthtoolConfig{Filter: Filter{Families: fams}}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return newEthtoolCollector(cfg, src, logger)
}

// ethtoolFixtureWant is a sample a fixture must yield; a negative value
// checks only that it exists.
type ethtoolFixtureWant struct {
	family string
	labels []string
	value  float64
}

// ethtoolFixtureWants are samples of each driver's captured output.
var ethtoolFixtureWants = []ethtoolFixtureWant{
	// mlx5, seed values
	{"xdp_nic_driver_info", []string{"device", "mlx5", "driver", "mlx5_core", "bus_info", "0000:03:00.0"}, 1},
	{"xdp_nic_rx_xdp_packets_total", []string{"device", "mlx5", "queue", "0", "action", "drop"}, 12602431},
	{"xdp_nic_rx_xdp_packets_total", []string{"device", "mlx5", "queue", "5", "action", "drop"}, 12252221},
	{"xdp_nic_rx_xdp_packets_total", []string{"device", "mlx5", "queue", "2", "action", "redirect"}, 0},
	{"xdp_nic_rx_xdp_packets_total", []string{"device", "mlx5", "queue", "2", "action", "tx"}, 0},
	{"xdp_nic_rx_xdp_tx_failures_total", []string{"device", "mlx5", "queue", "1", "reason", "full"}, 0},
	{"xdp_nic_xdp_xmit_packets_total", []string{"device", "mlx5", "queue", "3"}, 0},
	{"xdp_nic_xdp_xmit_failures_total", []string{"device", "mlx5", "queue", "3", "reason", "error"}, 0},
	{"xdp_nic_rx_page_cache_events_total", []string{"device", "mlx5", "queue", "1", "event", "reuse"}, 13091898},
	{"xdp_nic_rx_page_cache_events_total", []string{"device", "mlx5", "queue", "4", "event", "empty"}, 5032563},
	{"xdp_nic_rx_page_cache_events_total", []string{"device", "mlx5", "queue", "4", "event", "waive"}, 0},
	{"xdp_nic_rx_page_pool_allocations_total", []string{"device", "mlx5", "queue", "0", "path", "slow_high_order"}, 0},
	{"xdp_nic_rx_page_pool_recycles_total", []string{"device", "mlx5", "queue", "5", "result", "released_ref"}, 0},
	{"xdp_nic_rx_cqe_compressed_packets_total", []string{"device", "mlx5", "queue", "3"}, 1349297},
	{"xdp_nic_rx_cqe_compressed_blocks_total", []string{"device", "mlx5", "queue", "3"}, 223895},
	{"xdp_nic_phy_rx_packets_by_size_total", []string{"device", "mlx5", "size", "64"}, 88243413},
	{"xdp_nic_phy_rx_packets_by_size_total", []string{"device", "mlx5", "size", "65_to_127"}, 0},
	{"xdp_nic_pci_outbound_stalled_ratio", []string{"device", "mlx5", "op", "write"}, 0.04},
	{"xdp_nic_pci_outbound_stalled_ratio", []string{"device", "mlx5", "op", "read"}, 0},
	{"xdp_nic_pci_outbound_stalled_seconds_total", []string{"device", "mlx5", "op", "read"}, 0},
	{"xdp_nic_queue_stat_ch_poll", []string{"device", "mlx5", "queue", "0"}, 27183},
	{"xdp_nic_queue_stat_tx_cqes", []string{"device", "mlx5", "queue", "0"}, 1739714},
	{"xdp_nic_stat_ch_poll", []string{"device", "mlx5"}, 27183},
	{"xdp_nic_stat_rx_prio0_packets", []string{"device", "mlx5"}, 73608194},
	{"xdp_nic_ring_descriptors", []string{"device", "mlx5", "ring", "rx"}, 512},
	{"xdp_nic_ring_descriptors_max", []string{"device", "mlx5", "ring", "tx"}, 8192},
	{"xdp_nic_private_flag_enabled", []string{"device", "mlx5", "flag", "rx_cqe_compress"}, 1},
	{"xdp_nic_private_flag_enabled", []string{"device", "mlx5", "flag", "rx_striding_rq"}, 0},
	{"xdp_nic_private_flag_enabled", []string{"device", "mlx5", "flag", "rx_cqe_moder"}, 1},
	// i40e
	{"xdp_nic_driver_info", []string{"device", "i40e", "driver", "i40e", "firmware_version", "8.60 0x8000bd5d 1.3140.0"}, 1},
	{"xdp_nic_queue_stat_tx_packets", []string{"device", "i40e", "queue", "0"}, 9652980690},
	{"xdp_nic_queue_stat_rx_bytes", []string{"device", "i40e", "queue", "1"}, 4160893309842},
	{"xdp_nic_stat_veb_rx_bytes", []string{"device", "i40e"}, 0},
	// ice
	{"xdp_nic_driver_info", []string{"device", "ice", "driver", "ice"}, 1},
	{"xdp_nic_queue_stat_tx_packets", []string{"device", "ice", "queue", "0"}, 3659792718},
	{"xdp_nic_queue_stat_tx_bytes", []string{"device", "ice", "queue", "11"}, -1},
	{"xdp_nic_stat_rx_bytes", []string{"device", "ice"}, 14645706696119},
	// ixgbe
	{"xdp_nic_rx_queue_packets_total", []string{"device", "ixgbe", "queue", "1"}, 54703135727},
	{"xdp_nic_queue_stat_tx_bp_napi_yield", []string{"device", "ixgbe", "queue", "3"}, 0},
	{"xdp_nic_stat_fdir_match", []string{"device", "ixgbe"}, 490432032343},
	// bnxt
	{"xdp_nic_driver_info", []string{"device", "bnxt", "driver", "bnxt_en"}, 1},
	{"xdp_nic_queue_stat_rx_ucast_packets", []string{"device", "bnxt", "queue", "0"}, 276347403},
	{"xdp_nic_stat_rx_64b_frames", []string{"device", "bnxt"}, 1670188},
	// virtio_net
	{"xdp_nic_rx_queue_packets_total", []string{"device", "virtio_net", "queue", "1"}, 37051154},
	{"xdp_nic_queue_stat_tx_kicks", []string{"device", "virtio_net", "queue", "0"}, 0},
	{"xdp_nic_rx_xdp_packets_total", []string{"device", "virtio_net", "queue", "1", "action", "redirect"}, 0},
	{"xdp_nic_rx_xdp_processed_packets_total", []string{"device", "virtio_net", "queue", "0"}, 0},
	{"xdp_nic_xdp_xmit_packets_total", []string{"device", "virtio_net", "queue", "1"}, 0},
	{"xdp_nic_xdp_xmit_failures_total", []string{"device", "virtio_net", "queue", "1", "reason", "error"}, 0},
	{"xdp_nic_ring_descriptors", []string{"device", "virtio_net", "ring", "tx"}, 256},
	// veth
	{"xdp_nic_stat_peer_ifindex", []string{"device", "veth"}, 8},
	{"xdp_nic_rx_xdp_processed_bytes_total", []string{"device", "veth", "queue", "0"}, 0},
	{"xdp_nic_rx_xdp_tx_failures_total", []string{"device", "veth", "queue", "0", "reason", "error"}, 0},
	{"xdp_nic_queue_stat_rx_drops", []string{"device", "veth", "queue", "0"}, 0},
	{"xdp_nic_channels", []string{"device", "veth", "channel", "rx"}, 1},
	{"xdp_nic_channels_max", []string{"device", "veth", "channel", "tx"}, 2},
}

// TestEthtoolFixtures checks, on captured output of each driver, that each
// stat lands in the expected family with the expected labels and value.
func TestEthtoolFixtures(t *testing.T) {
	src := loadFixtures(t, "mlx5", "i40e", "ice", "ixgbe", "bnxt", "virtio_net", "veth")
	c := fixtureCollector(t, src, "", "", nil)
	mfs := gather(t, c)

	for _, w := range ethtoolFixtureWants {
		got := mfs.Value(t, w.family, w.labels...)
		if w.value >= 0 && got != w.value {
			t.Errorf("%s%v = %v, want %v", w.family, w.labels, got, w.value)
		}
	}

	// A curated stat is not also untyped, nor is the device total of a
	// curated per-queue stat (rx_xdp_drop, rx_cache_reuse of mlx5, rx_packets
	// of i40e).
	for _, name := range []string{"xdp_nic_queue_stat_rx_xdp_drop", "xdp_nic_queue_stat_rx_cache_reuse",
		"xdp_nic_stat_rx_xdp_drop", "xdp_nic_stat_rx_cache_reuse", "xdp_nic_stat_rx_packets",
		"xdp_nic_stat_rx_packets_phy", "xdp_nic_stat_outbound_pci_stalled_wr", "xdp_nic_queue_stat_rx_xdp_drops",
		"xdp_nic_queue_stat_rx_packets",
		"xdp_nic_stat_rx_64_bytes_phy"} {
		if _, ok := mfs[name]; ok {
			t.Errorf("%s exported although its stat is curated", name)
		}
	}
	// Unsupported calls are absent, not zero.
	for _, fam := range []string{"xdp_nic_ring_descriptors", "xdp_nic_channels"} {
		for _, m := range mfs[fam].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "device" && (l.GetValue() == "ice" || (fam == "xdp_nic_ring_descriptors" && l.GetValue() == "veth")) {
					t.Errorf("%s has a sample for %s, whose fixture does not support it", fam, l.GetValue())
				}
			}
		}
	}

	// Nothing vanishes: every stat of every (real) fixture is in one
	// series, alone or summed (a NIC signal's parts, a summed queue), but
	// the device totals of curated per-queue stats, which are in none.
	for name, d := range src.devs {
		e := c.devices[src.index[name]].plan.Load()
		in := make([]int, len(d.names))
		for _, s := range e.samples {
			for _, i := range append([]int{s.idx}, s.summed...) {
				in[i]++
			}
		}
		stats, hasPerQueue := ethtoolname.ParseAll(d.names)
		for i, n := range in {
			_, curated := perQueueCurated[stats[i].Base]
			total := curated && !stats[i].PerQueue && hasPerQueue[stats[i].Base]
			if total && n != 0 || !total && n != 1 {
				t.Errorf("%s: stat %q is in %d series (a device total of curated queues: %v)", name, d.names[i], n, total)
			}
		}
	}
}

func TestEthtoolDefaultMetricsExclude(t *testing.T) {
	src := loadFixtures(t, "mlx5")
	mfs := gather(t, fixtureCollector(t, src, "", DefaultEthtoolMetricsExclude, nil))
	mfs.Value(t, "xdp_nic_stat_rx_prio0_packets", "device", "mlx5")
	mfs.Value(t, "xdp_nic_rx_xdp_packets_total", "device", "mlx5", "queue", "0", "action", "drop")
	for name := range mfs {
		if strings.HasPrefix(name, "xdp_nic_queue_stat_") {
			t.Errorf("%s exported by default", name)
		}
	}
	mfs = gather(t, fixtureCollector(t, src, "queue_stat_ch_.*", "", nil))
	mfs.Value(t, "xdp_nic_queue_stat_ch_arm", "device", "mlx5", "queue", "0")
	if _, ok := mfs["xdp_nic_stat_rx_prio0_packets"]; ok {
		t.Error("metrics-include queue_stat_ch_.* exported a device-wide stat")
	}
	if _, ok := mfs["xdp_nic_rx_xdp_packets_total"]; ok {
		t.Error("metrics-include queue_stat_ch_.* exported a curated family")
	}
}

func TestEthtoolOddNamesAndCollisions(t *testing.T) {
	var logs exportertest.Log
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src := loadFixtures(t, "odd")
	c := fixtureCollector(t, src, "", "", logger)
	for range 3 {
		mfs := gather(t, c)
		for fam, want := range map[string]float64{
			"xdp_nic_stat_rx_bytes":          3, // "RX Bytes" sorts before "rx-bytes" and "rx_bytes"
			"xdp_nic_stat_port_rx_dropped":   4,
			"xdp_nic_stat_1st_stat":          5,
			"xdp_nic_stat_weird":             6,
			"xdp_nic_stat_rx_pkts_good":      7,
			"xdp_nic_stat_tx_queue_01_bytes": 12,
		} {
			if got := mfs.Value(t, fam, "device", "odd"); got != want {
				t.Errorf("%s = %v, want %v", fam, got, want)
			}
		}
		if got := mfs.Value(t, "xdp_nic_rx_queue_packets_total", "device", "odd", "queue", "0"); got != 11 {
			t.Errorf("rx_queue_packets_total{queue=0} = %v, want 11 (from rx-0.packets)", got)
		}
		mfs.Value(t, "xdp_nic_queue_stat_tx_cnt", "device", "odd", "queue", "2")
		mfs.Value(t, "xdp_nic_queue_stat_rx_ucast_packets", "device", "odd", "queue", "3")
	}
	out := logs.String()
	for _, want := range []string{
		`kept="RX Bytes" dropped=rx-bytes`, `kept="RX Bytes" dropped=rx_bytes`,
		`kept=rx-0.packets dropped=rx0_packets`, `kept=rx-0.packets dropped=rx_queue_0_packets`,
		`stat=...`,
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want exactly one debug line with %s (names are classified once), log:\n%s", want, out)
		}
	}
}

// TestEthtool20000Stats runs a device with 20,000 stats: 400 queues of 50
// mlx5 per-queue stats.
func TestEthtool20000Stats(t *testing.T) {
	d := bigFixture("mlx5_core", 400, 50, 0)
	if len(d.names) != 20000 {
		t.Fatalf("fixture has %d stats", len(d.names))
	}
	src := newFixtureSource(map[string]*fixtureDev{"big": d})
	// The pedantic registry rejects duplicate series; promlint is left out
	// here because its duplicate check is quadratic in a family's size.
	list, err := pedantic(t, fixtureCollector(t, src, "", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	mfs := exportertest.ByName(list)
	// 20,000 stats, plus driver_info.
	if n := mfs.Count(); n != 20001 {
		t.Fatalf("%d series, want 20001", n)
	}
	mfs.Value(t, "xdp_nic_rx_xdp_packets_total", "device", "big", "queue", "399", "action", "drop")
}

// TestEthtoolCache checks that string sets are read once per change, not
// per scrape, and that a changed stat count is picked up.
func TestEthtoolCache(t *testing.T) {
	src := loadFixtures(t, "veth", "mlx5")
	c := fixtureCollector(t, src, "", "", nil)
	for range 3 {
		gather(t, c)
	}
	for call, want := range map[string]int{
		"StatNames veth": 1, "StatNames mlx5": 1, "PrivFlagNames mlx5": 1,
		"Stats veth": 3, "Stats mlx5": 3, "PrivFlags mlx5": 3,
		"Ring veth": 1, // EOPNOTSUPP is remembered
		"Ring mlx5": 3, "Channels mlx5": 1,
	} {
		dev := call[strings.Index(call, " ")+1:]
		if got := src.count(call[:strings.Index(call, " ")], dev); got != want {
			t.Errorf("%s called %d times over 3 scrapes, want %d", call, got, want)
		}
	}

	// ethtool -L: the veth now has a second queue.
	veth := *src.devs["veth"]
	veth.names = append(append([]string(nil), veth.names...), "rx_queue_1_xdp_drops")
	veth.vals = append(append([]uint64(nil), veth.vals...), 42)
	veth.info.NStats = len(veth.names)
	src.set("veth", &veth)
	mfs := gather(t, c)
	if got := mfs.Value(t, "xdp_nic_rx_xdp_packets_total", "device", "veth", "queue", "1", "action", "drop"); got != 42 {
		t.Fatalf("new queue's drops = %v, want 42", got)
	}
	if got := src.count("StatNames", "veth"); got != 2 {
		t.Errorf("StatNames veth called %d times, want 2", got)
	}
}

// countChangingSource reports a new stat count between GDRVINFO and
// GSTATS, as a driver reconfigured mid-scrape does.
type countChangingSource struct{ *fixtureSource }

func (s countChangingSource) Stats(name string, n int, dst []uint64) ([]uint64, error) {
	return dst, fmt.Errorf("%w: test", ethtoolioctl.ErrStatsChanged)
}

func TestEthtoolStatsChangedMidScrape(t *testing.T) {
	src := loadFixtures(t, "veth")
	c := fixtureCollector(t, countChangingSource{src}, "", "", nil)
	for range 2 {
		mfs := gather(t, c)
		mfs.Value(t, "xdp_nic_driver_info", "device", "veth")
		if _, ok := mfs["xdp_nic_stat_peer_ifindex"]; ok {
			t.Error("stats emitted although the count changed")
		}
	}
	if got := src.count("StatNames", "veth"); got != 2 {
		t.Errorf("names re-read %d times, want 2 (the changed count drops the cache)", got)
	}
}

func TestEthtoolVanishedDevice(t *testing.T) {
	src := loadFixtures(t, "veth", "mlx5")
	src.gone["mlx5"] = true
	c := fixtureCollector(t, src, "", "", nil)
	ch := make(chan prometheus.Metric, 1000)
	if err := c.Update(context.Background(), NewLinkSnapshot(), ch); err != nil {
		t.Fatalf("a vanished interface failed the scrape: %v", err)
	}
	close(ch)
	n := 0
	for range ch {
		n++
	}
	if n == 0 {
		t.Fatal("no metrics from the device that is still there")
	}
}

func TestEthtoolDeviceFilter(t *testing.T) {
	src := loadFixtures(t, "veth", "mlx5", "i40e")
	c := newEthtoolCollector(EthtoolConfig{
		Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile("mlx5|i40"), regexp.MustCompile("i40e"))},
	}, src, slog.New(slog.DiscardHandler))
	mfs := gather(t, c)
	var devs []string
	for _, m := range mfs["xdp_nic_driver_info"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "device" {
				devs = append(devs, l.GetValue())
			}
		}
	}
	// "i40" does not match "i40e" (anchored); "i40e" is excluded anyway.
	if fmt.Sprint(devs) != "[mlx5]" {
		t.Fatalf("devices = %v, want [mlx5]", devs)
	}
}

// bigFixture builds a device like a large mlx5 host's: devWide device-wide
// stats and perQueue stats for each of queues queues, named as mlx5 does.
func bigFixture(driver string, queues, perQueue, devWide int) *fixtureDev {
	rx := []string{"packets", "bytes", "csum_complete", "csum_unnecessary", "csum_none", "xdp_drop", "xdp_redirect",
		"xdp_tx_xmit", "xdp_tx_full", "xdp_tx_err", "xdp_tx_cqes", "lro_packets", "lro_bytes", "removed_vlan_packets",
		"wqe_err", "mpwqe_filler_cqes", "mpwqe_filler_strides", "buff_alloc_err", "cqe_compress_blks", "cqe_compress_pkts",
		"cache_reuse", "cache_full", "cache_empty", "cache_busy", "cache_waive", "congst_umr", "arfs_err", "recover",
		"pp_alloc_fast", "pp_alloc_slow", "pp_recycle_cached", "pp_recycle_ring"}
	tx := []string{"packets", "bytes", "tso_packets", "tso_bytes", "csum_partial", "nop", "stopped", "dropped",
		"xmit_more", "recover", "cqes", "wake", "cqe_err", "xdp_xmit", "xdp_full", "xdp_err"}
	ch := []string{"events", "poll", "arm", "aff_change", "eq_rearm"}
	var per []string
	for _, s := range rx {
		per = append(per, "rx%d_"+s)
	}
	for _, s := range tx {
		per = append(per, "tx%d_"+s)
	}
	for _, s := range ch {
		per = append(per, "ch%d_"+s)
	}
	for i := 0; len(per) < perQueue; i++ {
		per = append(per, fmt.Sprintf("rx%%d_extra_%d", i))
	}
	per = per[:perQueue]
	d := &fixtureDev{info: ethtoolioctl.DriverInfo{Driver: driver, Version: "6.18", BusInfo: "0000:03:00.0"}}
	for i := range devWide {
		d.names = append(d.names, fmt.Sprintf("vport_stat_%d", i))
	}
	for q := range queues {
		for _, p := range per {
			d.names = append(d.names, fmt.Sprintf(p, q))
		}
	}
	d.vals = make([]uint64, len(d.names))
	for i := range d.vals {
		d.vals[i] = uint64(i) * 1000
	}
	d.info.NStats = len(d.names)
	return d
}

// BenchmarkEthtoolScrape is one full Update over three devices shaped like
// a large mlx5 host's: 64 queues x 37 per-queue stats + 132 device-wide
// stats = 2,500 stats each. The fixture source does no ioctl, so this is
// the exporter's own cost per scrape; the kernel's share is in
// TestCompareNodeExporter.
func BenchmarkEthtoolScrape(b *testing.B) {
	for _, exclude := range []string{DefaultEthtoolMetricsExclude, ""} {
		b.Run("metrics-exclude="+exclude, func(b *testing.B) {
			devs := map[string]*fixtureDev{}
			for i := range 3 {
				devs[fmt.Sprintf("mlx5p%d", i)] = bigFixture("mlx5_core", 64, 37, 132)
			}
			c := fixtureCollector(b, newFixtureSource(devs), "", exclude, nil)
			ch := make(chan prometheus.Metric, 8192)
			done := make(chan int)
			go func() {
				n := 0
				for range ch {
					n++
				}
				done <- n
			}()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.Update(context.Background(), NewLinkSnapshot(), ch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(ch)
			b.ReportMetric(float64(<-done)/float64(b.N), "series/op")
		})
	}
}

// TestEthtoolRawRepeatsNoTyped: on every captured driver dump, no raw
// stat_* series carries a count that a typed family of the same device
// carries, summed over its queues: a device total of per-queue stats
// (mlx5's rx_cache_reuse beside rx<N>_cache_reuse) is the typed family's
// sum(), not a second family. Equal counts of more than 1,000 in a real
// dump are the same counter, but for the counters rawCoincidences names.
func TestEthtoolRawRepeatsNoTyped(t *testing.T) {
	mfs := gather(t, fixtureCollector(t, allFixtures(t), "", DefaultEthtoolMetricsExclude, nil))
	typed := map[string]map[float64]string{} // device -> summed value -> family{labels}
	for name, mf := range mfs {
		if strings.HasPrefix(name, "xdp_nic_stat_") || mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		sums := map[string]float64{}
		for _, m := range mf.GetMetric() {
			sums[labelsWithout(m, "queue")] += exportertest.Value(m)
		}
		for labels, v := range sums {
			dev := strings.TrimPrefix(strings.Split(labels, ",")[0], "device=")
			if typed[dev] == nil {
				typed[dev] = map[float64]string{}
			}
			typed[dev][v] = name + "{" + labels + "}"
		}
	}
	raw := 0
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "xdp_nic_stat_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			raw++
			dev, v := exportertest.Label(m, "device"), exportertest.Value(m)
			if fam, dup := typed[dev][v]; dup && v > 1000 && !rawCoincidences[dev+" "+name] {
				t.Errorf("%s{device=%q} = %v repeats %s", name, dev, v, fam)
			}
		}
	}
	if raw == 0 {
		t.Fatal("no raw stat series: the test compared nothing")
	}
}

// rawCoincidences are the raw stats of the fixtures that equal a typed
// family's count without being the same counter.
var rawCoincidences = map[string]bool{
	// bnxt counts every frame and the good ones apart; the captured port
	// had no bad frame.
	"bnxt xdp_nic_stat_rx_total_frames": true, "bnxt xdp_nic_stat_tx_total_frames": true,
	// The vmxnet3 dump is of a flood into an XDP_DROP program: every
	// frame received ran XDP and was dropped.
	"vmxnet3 xdp_nic_stat_xdp_packets": true, "vmxnet3 xdp_nic_stat_xdp_drops": true,
}
