package collector

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/safchain/ethtool"

	"github.com/xdp-exporter/xdp_exporter/bpf/napi"
	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdpmon"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolnl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci/pcitest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
	"github.com/xdp-exporter/xdp_exporter/internal/mdsection"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// hostSeriesBudget is what one scrape of the whole-host fixture (128 CPUs,
// two 64-queue mlx5 ports) may send with the default collectors and flags:
// 4,500 since the 1.0 interface (docs/dev/metrics-design.md), down from 5,959.
const hostSeriesBudget = 4500

// The whole-host fixture: a two-socket server of 128 CPUs (node 0: CPUs
// 0-63, node 1: 64-127) with two 64-queue ConnectX ports, one per socket,
// each running an XDP program.
const (
	hostQueues   = 64
	hostCPUs     = 128
	hostNodeCPUs = 64
)

type hostNIC struct {
	name    string
	ifindex uint32
	node    int
	root    string // the root port above the NIC
	pci     string
	irqBase uint32 // IRQ of queue 0; queue q has irqBase+q
	napi    uint32 // NAPI id of queue 0
}

// hostNICs use ifindexes no device of the test host has, so that the BPF
// collectors' real counters of the host's own devices never match them.
var hostNICs = []hostNIC{
	{name: "mlx5p0", ifindex: 90001, node: 0, root: "0000:16:02.0", pci: "0000:17:00.0", irqBase: 300, napi: 8193},
	{name: "mlx5p1", ifindex: 90002, node: 1, root: "0000:97:02.0", pci: "0000:98:00.0", irqBase: 400, napi: 8449},
}

// hostLinks is the fixture host's interface dump: lo and the two ports,
// each with an XDP program attached in native mode.
func hostLinks(progs []ebpf.ProgramID) *Links {
	list := []Link{{Index: 1, Name: "lo"}}
	for i, n := range hostNICs {
		list = append(list, Link{Index: n.ifindex, Name: n.name,
			XDP: []xdpAttachment{{ifindex: int(n.ifindex), device: n.name, mode: "native", progID: progs[i]}}})
	}
	return newLinks(list)
}

// mlx5Queued matches mlx5's per-queue stat names: rx3_cache_reuse,
// tx3_xdp_xmit, ch3_poll.
var mlx5Queued = regexp.MustCompile(`^(rx|tx|ch)(\d+)_(.+)$`)

// hostEthtool is the captured mlx5 dump (testdata/ethtool/mlx5.txt) grown
// to 64 queues: every per-queue name the capture has for any queue exists
// for each of the 64, device-wide names stay as captured. The standard
// sources answer as mlx5 fills them on Linux 6.18: the eth-mac frames and
// octets (the values of the *_phy names, mlx5e_stats_eth_mac_get), the
// netdev family's qstats of newHostNetdev, and rx_missed_errors as
// rx_out_of_buffer (mlx5e_get_stats).
func hostEthtool(t testing.TB) *fixtureSource {
	devs := map[string]*fixtureDev{}
	for _, n := range hostNICs {
		d := loadFixture(t, filepath.Join("testdata", "ethtool", "mlx5.txt"))
		var names []string
		seen := map[string]bool{}
		var perQueue [][2]string
		for _, name := range d.names {
			m := mlx5Queued.FindStringSubmatch(name)
			if m == nil {
				names = append(names, name)
				continue
			}
			if k := m[1] + " " + m[3]; !seen[k] {
				seen[k] = true
				perQueue = append(perQueue, [2]string{m[1], m[3]})
			}
		}
		// The benchmark notes' capture lists no rx<N>_packets, which every mlx5 RX
		// queue reports (rq_stats_desc in mlx5's en_stats.c).
		perQueue = append(perQueue, [2]string{"rx", "packets"})
		for q := range hostQueues {
			for _, p := range perQueue {
				names = append(names, fmt.Sprintf("%s%d_%s", p[0], q, p[1]))
			}
		}
		d.names = names
		d.vals = make([]uint64, len(names))
		for i := range d.vals {
			d.vals[i] = uint64(i) * 1000
		}
		d.info.NStats = len(names)
		d.info.BusInfo = n.pci
		d.chans = &ethtool.Channels{MaxCombined: hostQueues, CombinedCount: hostQueues}
		d.config = hostNICConfig()
		devs[n.name] = d
	}
	src := newFixtureSource(devs)
	src.std.qstats = newHostNetdev().qstats
	for _, n := range hostNICs {
		src.index[n.name] = int(n.ifindex)
		d := devs[n.name]
		val := func(name string) uint64 { return d.vals[slices.Index(d.names, name)] }
		mac := ethtoolnl.MAC{Ifindex: n.ifindex}
		for id, name := range map[int]string{ethtoolnl.FramesReceivedOK: "rx_packets_phy", ethtoolnl.FramesTransmittedOK: "tx_packets_phy",
			ethtoolnl.OctetsReceivedOK: "rx_bytes_phy", ethtoolnl.OctetsTransmittedOK: "tx_bytes_phy"} {
			mac.Values[id], mac.Present[id] = val(name), true
		}
		src.std.mac = append(src.std.mac, mac)
		link := rtnl.LinkStats{Index: n.ifindex, N: len(rtnl.Stats64Names)}
		link.Values[slices.Index(rtnl.Stats64Names[:], "rx_missed_errors")] = val("rx_out_of_buffer")
		src.std.link = append(src.std.link, link)
		src.std.pause = append(src.std.pause, ethtoolnl.Pause{Ifindex: n.ifindex, Name: n.name, RX: true, TX: true,
			HasRXFrames: true, HasTXFrames: true, RXFrames: 12, TXFrames: 3400})
		src.std.fec = append(src.std.fec, ethtoolnl.FEC{Ifindex: n.ifindex, Name: n.name, Active: 50, HasActive: true,
			HasCorrected: true, HasUncorr: true, Corrected: 1234, Uncorrectable: 5})
	}
	return src
}

// hostNICConfig is an mlx5 port's configuration as the driver sets it by
// default (drivers/net/ethernet/mellanox/mlx5/core/en_main.c,
// en_ethtool.c): 100 Gbit/s, adaptive RX moderation from 8 us and 128
// frames, TX 16 us and 32 frames, pause on both ways, a Toeplitz hash of
// addresses and ports for TCP and UDP over a 256-entry indirection table
// spread evenly (ethtool_rxfh_indir_default) over the 64 queues, no
// ntuple rules.
func hostNICConfig() fixtureConfig {
	c := fixtureConfig{
		link:     &ethtoolioctl.Link{SpeedMbps: 100000, Duplex: 1, Autoneg: true},
		coalesce: &ethtool.Coalesce{RxCoalesceUsecs: 8, RxMaxCoalescedFrames: 128, UseAdaptiveRxCoalesce: 1, TxCoalesceUsecs: 16, TxMaxCoalescedFrames: 32},
		pause:    &ethtool.Pause{RxPause: 1, TxPause: 1},
		rss:      &ethtoolioctl.RSS{HashFunc: 1, Indir: make([]uint32, 256)},
		fields:   map[uint32]uint64{},
		ntuple:   new(uint32),
	}
	for i := range c.rss.Indir {
		c.rss.Indir[i] = uint32(i % hostQueues)
	}
	for _, ft := range hashFlowTypes {
		c.fields[ft.flow] = 1<<4 | 1<<5 | 1<<6 | 1<<7 // RXH_IP_SRC, _DST, L4_B_0_1, L4_B_2_3
	}
	return c
}

// hostNetdev is the netdev family's answer for the fixture host as the
// kernel fills it (net/core/netdev-genl.c, page_pool_user.c) for mlx5 as
// of Linux 6.18: per RX queue packets, bytes, alloc-fail, the four hw-gro
// and three csum counters ("net/mlx5e: Report RX csum netdev stats"), per
// TX queue packets, bytes, hw-gso packets and bytes and csum-none; a NAPI
// with its IRQ per channel; a page pool per RX queue with
// CONFIG_PAGE_POOL_STATS.
var (
	hostRxQstats = []string{"rx-packets", "rx-bytes", "rx-alloc-fail", "rx-hw-gro-packets", "rx-hw-gro-bytes",
		"rx-hw-gro-wire-packets", "rx-hw-gro-wire-bytes", "rx-csum-complete", "rx-csum-unnecessary", "rx-csum-none"}
	hostTxQstats = []string{"tx-packets", "tx-bytes", "tx-hw-gso-packets", "tx-hw-gso-bytes", "tx-csum-none"}
)

func newHostNetdev() *netdevValues {
	v := &netdevValues{devs: []netdev.Dev{{Ifindex: 1, HasRxMetadata: true, HasXSKFeatures: true}}}
	counts := func(names []string, q int) map[string]uint64 {
		out := map[string]uint64{}
		for i, name := range names {
			out[name] = uint64(1000*q + i)
		}
		return out
	}
	for _, n := range hostNICs {
		v.devs = append(v.devs, netdev.Dev{Ifindex: n.ifindex, XDPFeatures: 0x5f, // all but hw-offload
			XDPZCMaxSegs: 1, HasZCMaxSegs: true, XDPRxMetadata: 0x7, HasRxMetadata: true, XSKFeatures: 0x3, HasXSKFeatures: true})
		for typ, names := range [][]string{hostRxQstats, hostTxQstats} {
			v.qstats = append(v.qstats, qstatsOf(n.ifindex, false, 0, 0, counts(names, 0)))
			for q := range hostQueues {
				v.queueQstats = append(v.queueQstats, qstatsOf(n.ifindex, true, uint32(typ), uint32(q), counts(names, q)))
			}
		}
		for q := range uint32(hostQueues) {
			v.napis = append(v.napis, netdev.Napi{Ifindex: n.ifindex, ID: n.napi + q, IRQ: n.irqBase + q, HasIRQ: true,
				HasDeferHardIRQs: true, HasGROFlushTimeout: true})
			for typ := range uint32(2) {
				v.queues = append(v.queues, netdev.Queue{Ifindex: n.ifindex, ID: q, QueueType: typ, NapiID: n.napi + q})
			}
			pool := uint64(n.ifindex)*100 + uint64(q)
			v.pools = append(v.pools, netdev.PagePool{ID: pool, Ifindex: n.ifindex, NapiID: uint64(n.napi + q),
				Inflight: 1024, InflightMem: 1024 * 4096})
			stats := netdev.PoolStats{ID: pool, Ifindex: n.ifindex}
			for i := range stats.Values {
				stats.Values[i], stats.Present[i] = uint64(i)*7, true
			}
			v.poolStats = append(v.poolStats, stats)
		}
	}
	return v
}

// hostSysfs writes the fixture host's sysfs and /proc/irq: each port on a
// Gen4 x16 link to its socket's root port, with AER, on its socket's NUMA
// node; each queue's IRQ on the CPU of its number on that node.
func hostSysfs(t testing.TB) (sys, proc string) {
	root := t.TempDir()
	sys, proc = filepath.Join(root, "sys"), filepath.Join(root, "proc")
	irq := filepath.Join(proc, "irq")
	write := func(path, content string) { pcitest.WriteFile(t, path, content) }
	write(filepath.Join(sys, "bus", "pci", "drivers_autoprobe"), "1\n")
	for node := range hostCPUs / hostNodeCPUs {
		write(filepath.Join(sys, "devices", "system", "node", fmt.Sprintf("node%d", node), "cpulist"),
			fmt.Sprintf("%d-%d\n", node*hostNodeCPUs, (node+1)*hostNodeCPUs-1))
	}
	for _, n := range hostNICs {
		rp := filepath.Join(sys, "devices", "pci"+n.root[:7], n.root)
		nic := filepath.Join(rp, n.pci)
		for _, dir := range []string{rp, nic} {
			write(filepath.Join(dir, "current_link_speed"), "16.0 GT/s PCIe\n")
			write(filepath.Join(dir, "current_link_width"), "16\n")
			write(filepath.Join(dir, "max_link_speed"), "16.0 GT/s PCIe\n")
			write(filepath.Join(dir, "max_link_width"), "16\n")
		}
		write(filepath.Join(nic, "numa_node"), strconv.Itoa(n.node)+"\n")
		write(filepath.Join(nic, "aer_dev_correctable"), pcitest.AERCorrectable)
		write(filepath.Join(nic, "aer_dev_nonfatal"), pcitest.AERNonFatal)
		write(filepath.Join(nic, "aer_dev_fatal"), pcitest.AERFatal)
		write(filepath.Join(nic, "net", n.name, "ifindex"), fmt.Sprintf("%d\n", n.ifindex))
		rel, err := filepath.Rel(filepath.Join(sys, "class", "net"), filepath.Join(nic, "net", n.name))
		if err != nil {
			t.Fatal(err)
		}
		pcitest.Symlink(t, rel, filepath.Join(sys, "class", "net", n.name))
		pcitest.Symlink(t, "../../../"+n.pci, filepath.Join(nic, "net", n.name, "device"))
		for q := range uint32(hostQueues) {
			i := strconv.FormatUint(uint64(n.irqBase+q), 10)
			cpu := strconv.Itoa(n.node*hostNodeCPUs + int(q))
			write(filepath.Join(nic, "msi_irqs", i), "msix\n")
			write(filepath.Join(irq, i, "smp_affinity_list"), cpu+"\n")
			write(filepath.Join(irq, i, "effective_affinity_list"), cpu+"\n")
		}
	}
	// /proc/interrupts as such a host prints it: the ports' vectors among
	// 300 others (timers, NVMe queues, the ports' async vectors), each
	// row 128 columns; a queue's vector counts on its own CPU.
	var rows []int
	for n := range 300 {
		rows = append(rows, n)
	}
	for _, n := range hostNICs {
		for q := range hostQueues {
			rows = append(rows, int(n.irqBase)+q)
		}
	}
	pcitest.WriteInterrupts(t, proc, hostCPUs, func(irq, cpu int) uint64 { return uint64(irq*hostCPUs + cpu) }, rows...)
	return sys, proc
}

// seedNapi claims a slot per device and context in the napi collector's
// table, as a poll would, and counts polls in it.
func seedNapi(t testing.TB, c *napiCollector, netns uint64) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range hostNICs {
		for ctx := range napi.NapiNapiCtxCTX_THREADED + 1 {
			vals := make([]napi.NapiNapiVal, cpus)
			vals[0].Polls[1], vals[0].Polls[64] = 100, 10
			if err := c.PutPolls(reap.Device{Ifindex: n.ifindex, Netns: uint32(netns)}, ctx, vals); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// seedXDP records, per port, aborted frames and failed redirects of its
// program.
func seedXDP(t testing.TB, c *xdpCollector, progs []ebpf.ProgramID) {
	for i, n := range hostNICs {
		var ek xdpmon.XdpmonExceptionKey
		ek.Dev.Ifindex, ek.Dev.Netns, ek.ProgId = n.ifindex, c.netns, uint32(progs[i])
		if err := c.PutException(ek, 5); err != nil {
			t.Fatal(err)
		}
		var rk xdpmon.XdpmonRedirectKey
		rk.Dev.Ifindex, rk.Dev.Netns, rk.ProgId, rk.Err = n.ifindex, c.netns, uint32(progs[i]), -6 // ENXIO
		if err := c.PutRedirect(rk, 5); err != nil {
			t.Fatal(err)
		}
	}
}

// hostFlags are the collector flags of one whole-host run.
type hostFlags struct {
	ethtoolSumQueues, ethtoolExclude, netdevExclude, cpuModes string
}

// commandLineHostFlags are the flags of an exporter started without any:
// parsed from an empty command line by the flags main declares, not
// copied from the constants behind their defaults.
func commandLineHostFlags(t testing.TB) hostFlags {
	t.Helper()
	app := kingpin.New("test", "")
	AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	value := func(flag string) string { return app.GetFlag(flag).Model().Value.String() }
	return hostFlags{ethtoolSumQueues: value("collector.nic.sum-queues"), ethtoolExclude: value("collector.nic.metrics-exclude"),
		netdevExclude: value("collector.netdev.metrics-exclude"), cpuModes: value("collector.cpu.modes")}
}

// hostFiles builds the default collectors of the fixture host that read
// files and answers, not the running kernel: cpu, ethtool, netdev, pcie and
// xsk, with flags.
func hostFiles(t testing.TB, flags hostFlags) map[string]Collector {
	re := func(s string) *regexp.Regexp { return regexp.MustCompile(s) }
	sys, proc := hostSysfs(t)
	nd := newHostNetdev()
	netdevFams, err := newFamilyFilter("netdev", nil, re(flags.netdevExclude), nil)
	if err != nil {
		t.Fatal(err)
	}
	ethtoolFams, err := newFamilyFilter("nic", nil, re(flags.ethtoolExclude), nil)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := newCPUCollector(CPUConfig{ProcFS: "testdata/proc/128cpu", Modes: re(flags.cpuModes)}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pcie, err := NewPCIeCollector(PCIeConfig{SysFS: sys, ProcFS: proc}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pcie.(*pcieCollector).netdev = nd
	return map[string]Collector{
		"cpu":    cpu,
		"nic":    newEthtoolCollector(EthtoolConfig{Filter: Filter{Families: ethtoolFams}, SumQueues: re(flags.ethtoolSumQueues)}, hostEthtool(t), slog.New(slog.DiscardHandler)),
		"netdev": newNetdevCollector(NetdevConfig{Filter: Filter{Families: netdevFams}, PerQueueStats: true, ProcFS: proc}, slog.New(slog.DiscardHandler), nd),
		"pcie":   pcie,
		"xsk":    &xskCollector{logger: slog.New(slog.DiscardHandler), src: xskSockets(nil)},
	}
}

// hostSet builds every default collector over the fixture host with flags,
// and the context of a scrape that sees the host's interfaces: hostFiles
// and the BPF collectors, the real ones, loaded and attached, their maps
// seeded. The device filter keeps the test host's own devices (and the
// other tests' veths) out of their tables.
func hostSet(t testing.TB, flags hostFlags) (*Set, *LinkSnapshot) {
	testenv.Privileged(t)
	fixtureDevices := newDeviceFilter(regexp.MustCompile("mlx5p[01]"), nil)
	var progs []ebpf.ProgramID
	for i := range hostNICs {
		p := loadDrop(t, fmt.Sprintf("host_drop%d", i))
		id, err := strconv.ParseUint(p.id, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, ebpf.ProgramID(id))
	}
	collectors := hostFiles(t, flags)
	napi, err := loadNapiCollector(NapiConfig{Filter: Filter{Devices: fixtureDevices}}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "loading the napi collector")
	seedNapi(t, napi, napi.netns)
	collectors["napi"] = napi
	xdp, err := NewXDPCollector(XDPConfig{Filter: Filter{Devices: fixtureDevices}}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "loading the monitor collector")
	seedXDP(t, xdp.(*xdpCollector), progs)
	collectors["monitor"] = xdp
	collectors["bpf"], err = newBPFCollector(BPFConfig{}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "building the bpf collector")
	set := NewSet(collectors, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Errorf("closing the collectors: %v", err)
		}
	})
	return set, fixedLinks(hostLinks(progs))
}

// hostGather is one scrape through the registry the exporter's handler
// builds per request, with every collector succeeding.
func hostGather(t testing.TB, set *Set, links *LinkSnapshot) []*dto.MetricFamily {
	reg := prometheus.NewRegistry()
	reg.MustRegister(set.scrapeOn(context.Background(), links))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "xdp_scrape_collector_success" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				t.Errorf("collector %s failed", m.GetLabel()[0].GetValue())
			}
		}
	}
	return mfs
}

// hostScrape is one scrape of the fixture host with flags.
func hostScrape(t testing.TB, flags hostFlags) []*dto.MetricFamily {
	set, links := hostSet(t, flags)
	return hostGather(t, set, links)
}

// hostCount is one scrape's series by collector and by family.
type hostCount struct {
	total       int
	byCollector map[string]int // from xdp_scrape_collector_series
	byFamily    map[string]int
}

func countHost(t testing.TB, mfs []*dto.MetricFamily) hostCount {
	c := hostCount{byCollector: map[string]int{}, byFamily: map[string]int{}}
	owner := map[string]string{}
	for _, f := range Catalogue() {
		owner[f.Name] = f.Collector
	}
	fromFamilies := map[string]int{}
	for _, mf := range mfs {
		n := exportertest.FamilySeries(mf)
		c.total += n
		c.byFamily[mf.GetName()] = n
		col, ok := owner[mf.GetName()]
		if !ok && strings.HasPrefix(mf.GetName(), "xdp_nic_") {
			col, ok = "nic", true // an untyped stat
		}
		if !ok {
			t.Errorf("family %s is in no collector's catalogue", mf.GetName())
		}
		if col != "" {
			fromFamilies[col] += n
		}
		if mf.GetName() == "xdp_scrape_collector_series" {
			for _, m := range mf.GetMetric() {
				c.byCollector[m.GetLabel()[0].GetValue()] = int(m.GetGauge().GetValue())
			}
		}
	}
	// The exporter's own count must agree with the exposition.
	for col, n := range fromFamilies {
		if c.byCollector[col] != n {
			t.Errorf("xdp_scrape_collector_series{collector=%q} = %d, the exposition has %d", col, c.byCollector[col], n)
		}
	}
	return c
}

// TestHostSeriesBudget scrapes the whole-host fixture through every
// default collector with the default flags and holds the total to
// hostSeriesBudget, printing the series per collector and per family
// (go test -v). The same host with every family per queue (no
// sum-queues, no metrics-exclude) must be over the budget: the defaults
// are what keep it under, and the test would see it if they stopped.
func TestHostSeriesBudget(t *testing.T) {
	got := countHost(t, hostScrape(t, commandLineHostFlags(t)))
	var cols []string
	for col := range got.byCollector {
		cols = append(cols, col)
	}
	sort.Strings(cols)
	for _, col := range cols {
		t.Logf("collector %-8s %5d series", col, got.byCollector[col])
	}
	fams := make([]string, 0, len(got.byFamily))
	for f := range got.byFamily {
		fams = append(fams, f)
	}
	sort.Slice(fams, func(i, j int) bool { return got.byFamily[fams[i]] > got.byFamily[fams[j]] })
	for _, f := range fams {
		t.Logf("family %-60s %5d", f, got.byFamily[f])
	}
	t.Logf("total %d series (budget %d)", got.total, hostSeriesBudget)
	if got.total > hostSeriesBudget {
		t.Errorf("the fixture host has %d series with the default flags, over the budget of %d", got.total, hostSeriesBudget)
	}

	wide := countHost(t, hostScrape(t, hostFlags{}))
	t.Logf("every family per queue: %d series", wide.total)
	if wide.total <= hostSeriesBudget {
		t.Errorf("every family per queue is %d series, within the budget: the test could not tell the defaults from no limit", wide.total)
	}
}

// TestHostSeriesDoc holds docs/cardinality.md's table to the fixture
// host's series per collector with the defaults, and with every family
// per queue; XDP_EXPORTER_RECORD=1 (make generate RECORD=1) rewrites it.
func TestHostSeriesDoc(t *testing.T) {
	got := countHost(t, hostScrape(t, commandLineHostFlags(t)))
	wide := countHost(t, hostScrape(t, hostFlags{}))
	cols := make([]string, 0, len(got.byCollector))
	for col := range got.byCollector {
		cols = append(cols, col)
	}
	sort.Strings(cols)
	checkSeriesDoc(t, cols, got, wide)
}

// seriesDoc is the page whose table of the fixture host's series this
// test writes (make generate RECORD=1) and holds to the scrape.
var seriesDoc = filepath.Join("..", "docs", "cardinality.md")

const (
	seriesDocBegin = "<!-- host-series: generated by make generate RECORD=1 (TestHostSeriesDoc); do not edit -->\n"
	seriesDocEnd   = "<!-- end of host-series -->\n"
)

func checkSeriesDoc(t *testing.T, cols []string, got, wide hostCount) {
	var b strings.Builder
	b.WriteString("| collector | series |\n|---|---|\n")
	for _, col := range cols {
		fmt.Fprintf(&b, "| %s | %d |\n", col, got.byCollector[col])
	}
	fmt.Fprintf(&b, "| **total** (the test's budget: %d) | **%d** |\n", hostSeriesBudget, got.total)
	fmt.Fprintf(&b, "| every family per queue (no sum-queues, no metrics-exclude) | %d |\n", wide.total)
	doc, err := os.ReadFile(seriesDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	want, err := mdsection.Replace(text, seriesDocBegin, seriesDocEnd, "\n"+b.String()+"\n")
	if err != nil {
		t.Fatalf("%s: %v", seriesDoc, err)
	}
	if testenv.Recording() {
		if err := os.WriteFile(seriesDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != text {
		t.Errorf("%s's table differs from the fixture host's series; make generate RECORD=1 rewrites it:\n%s", seriesDoc, b.String())
	}
}

// BenchmarkHostScrape is one scrape of the fixture host with the default
// flags, through the registry and the text encoder as the handler runs
// them (no HTTP, no gzip); series/op is the scrape's size.
func BenchmarkHostScrape(b *testing.B) {
	set, links := hostSet(b, commandLineHostFlags(b))
	series := 0
	b.ReportAllocs()
	for b.Loop() {
		mfs := hostGather(b, set, links)
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		series = 0
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
			series += exportertest.FamilySeries(mf)
		}
	}
	b.ReportMetric(float64(series), "series/op")
}
