package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// TestEthtoolVethXDPExact sends a known number of frames from each CPU to
// a veth with two RX queues and an XDP_DROP program, and checks the
// collector's per-queue veth XDP counters equal what was sent, exactly.
func TestEthtoolVethXDPExact(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdict(t, pair, xdptest.Drop)

	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the generator")
	defer g.Close()

	c, err := NewEthtoolCollector(EthtoolConfig{Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile(regexp.QuoteMeta(pair.Host.Name)), nil)}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// On veth the RX queue is the sending CPU modulo the queue count, so
	// sending from one CPU at a time fixes each queue's expected count.
	sent := map[string]uint64{"0": 0, "1": 0}
	for _, step := range []struct {
		cpu   int
		count uint64
	}{{0, 30_000}, {1, 20_000}, {0, 1_234}} {
		n, err := g.Run(context.Background(), trafficgen.Config{
			NS: pair.NS, Ifindex: pair.Peer.Index,
			SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
			Count: step.count, CPUs: []int{step.cpu},
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != step.count {
			t.Fatalf("generator sent %d frames, want %d", n, step.count)
		}
		sent[fmt.Sprint(step.cpu)] += step.count
		// veth counts a frame's bytes as it arrives: 60 for an XDP frame
		// (live or broadcast), but skb->len, past the 14-byte Ethernet
		// header, for one that arrives as an skb, as AF_PACKET sends
		// them.
		frameBytes := uint64(60)
		if g.UsesPacketSocket() {
			frameBytes = 60 - 14
		}

		mfs := gather(t, c)
		dev := pair.Host.Name
		for q, want := range sent {
			if got := mfs.Value(t, "xdp_nic_rx_xdp_packets_total", "device", dev, "queue", q, "action", "drop"); got != float64(want) {
				t.Errorf("queue %s: XDP drops = %v, want %d", q, got, want)
			}
			if got := mfs.Value(t, "xdp_nic_rx_xdp_processed_packets_total", "device", dev, "queue", q); got != float64(want) {
				t.Errorf("queue %s: XDP packets = %v, want %d", q, got, want)
			}
			if got := mfs.Value(t, "xdp_nic_rx_xdp_processed_bytes_total", "device", dev, "queue", q); got != float64(want*frameBytes) {
				t.Errorf("queue %s: XDP bytes = %v, want %d", q, got, want*frameBytes)
			}
			if got := mfs.Value(t, "xdp_nic_rx_xdp_packets_total", "device", dev, "queue", q, "action", "tx"); got != 0 {
				t.Errorf("queue %s: XDP_TX = %v, want 0", q, got)
			}
		}
		mfs.Value(t, "xdp_nic_driver_info", "device", dev, "driver", "veth")
		if vethChannelsBefore61(t) {
			if _, ok := mfs["xdp_nic_channels"]; ok {
				t.Errorf("channels exported for a veth whose kernel does not report them")
			}
			continue
		}
		if got := mfs.Value(t, "xdp_nic_channels", "device", dev, "channel", "rx"); got != 2 {
			t.Errorf("rx channels = %v, want 2", got)
		}
	}
}

// vethChannelsBefore61 reports whether veth lacks the ethtool channels
// operations on this kernel: the matrix's 5.10 answers both with
// EOPNOTSUPP, its 6.1 has them; a newer kernel without them fails.
func vethChannelsBefore61(t *testing.T) bool {
	t.Helper()
	pair := vethtest.Pair(t, 1)
	out, err := exec.Command("ethtool", "-l", pair.Host.Name).CombinedOutput()
	if err == nil {
		return false
	}
	if !testenv.KernelBefore(t, 6, 1) {
		t.Fatalf("ethtool -l %s: %v\n%s", pair.Host.Name, err, out)
	}
	return true
}

// TestEthtoolVethChurn scrapes 500 times back to back while veth pairs
// are created and deleted: no scrape may fail, panic or yield a
// duplicate series (the pedantic registry rejects duplicates).
func TestEthtoolVethChurn(t *testing.T) {
	testenv.Privileged(t)
	prefix := "xc" + vethns.UniqueID()
	c, err := NewEthtoolCollector(EthtoolConfig{
		Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile(prefix+".*"), nil)},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var made atomic.Int64
	var churnErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a, b := fmt.Sprintf("%sa%d", prefix, i%4), fmt.Sprintf("%sb%d", prefix, i%4)
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b}); err != nil {
				churnErr = err
				return
			}
			made.Add(1)
			if l, err := netlink.LinkByName(a); err == nil {
				_ = netlink.LinkDel(l)
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
		for i := range 4 {
			if l, err := netlink.LinkByName(fmt.Sprintf("%sa%d", prefix, i)); err == nil {
				_ = netlink.LinkDel(l)
			}
		}
	}()

	// At least 500 back-to-back scrapes, and more until the churn has made
	// and deleted 20 pairs (creating a veth takes far longer than a scrape)
	// and a scrape has met one of them: a pair lives for a few of the 500.
	seen, scrapes := 0, 0
	for i := 0; i < 500 || ((made.Load() < 20 || seen == 0) && churnErr == nil && i < 1_000_000); i++ {
		scrapes++
		r := &recorder{c: c}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(r)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		if r.err != nil {
			t.Fatalf("scrape %d failed: %v", i, r.err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "xdp_nic_driver_info" && len(mf.GetMetric()) > 0 {
				seen++
			}
		}
		checkNoDuplicates(t, mfs)
	}
	if churnErr != nil {
		t.Fatalf("churn: %v", churnErr)
	}
	if seen == 0 || made.Load() < 20 {
		t.Fatalf("churn did not overlap the scrapes: devices seen in %d scrapes, %d pairs made", seen, made.Load())
	}
	t.Logf("%d scrapes, churn devices present in %d, %d pairs created and deleted", scrapes, seen, made.Load())
}

func checkNoDuplicates(t *testing.T, mfs []*dto.MetricFamily) {
	t.Helper()
	for _, mf := range mfs {
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			k := fmt.Sprint(m.GetLabel())
			if seen[k] {
				t.Fatalf("duplicate series %s%s", mf.GetName(), k)
			}
			seen[k] = true
		}
	}
}

// TestEthtoolChannelsRenameEqualCount reconfigures a veth from 3 RX and 1
// TX channel to 1 RX and 8 TX: veth has 1 + 7 stats per RX and 2 per TX
// queue, so both have 24 stats under different names. The collector that
// cached the first plan must then report what a fresh collector does, and
// the value ethtool -S gives each stat.
func TestEthtoolChannelsRenameEqualCount(t *testing.T) {
	testenv.Privileged(t)
	id := vethns.UniqueID()
	pair, err := vethns.NewPair(vethns.PairConfig{Namespace: "xdpt-" + id, Host: "xt" + id + "d", Peer: "xt" + id + "g", Queues: 8})
	testenv.Check(t, err, "creating a veth pair with 8 queues")
	t.Cleanup(func() { pair.Close() })
	dev := pair.Host.Name
	channels := func(netns, dev string, rx, tx int) {
		t.Helper()
		args := []string{"ethtool", "-L", dev, "rx", fmt.Sprint(rx), "tx", fmt.Sprint(tx)}
		if netns != "" {
			args = append([]string{"ip", "netns", "exec", netns}, args...)
		}
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if vethChannelsBefore61(t) {
		t.Skip("veth on this kernel cannot change its channels (ethtool -L: operation not supported)")
	}
	// With XDP on the DUT end, veth wants at least as many RX queues there
	// as the peer has TX queues.
	channels(pair.Namespace, pair.Peer.Name, 8, 1)
	vethtest.AttachVerdict(t, pair, xdptest.Drop)
	cfg := EthtoolConfig{Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile(regexp.QuoteMeta(dev)), nil)}}
	cached, err := NewEthtoolCollector(cfg, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "ethtool collector")
	defer cached.Close()

	channels("", dev, 3, 1)
	before := len(vethtest.EthtoolS(t, "", dev))
	gather(t, cached)
	channels("", dev, 1, 8)
	if after := len(vethtest.EthtoolS(t, "", dev)); after != before {
		t.Fatalf("%d stats with rx 3 tx 1, %d with rx 1 tx 8: the test needs equal counts", before, after)
	}
	vethtest.SendExactly(t, pair, 1000)

	fresh, err := NewEthtoolCollector(cfg, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "ethtool collector")
	defer fresh.Close()
	got, want := deviceSeries(gather(t, cached)), deviceSeries(gather(t, fresh))
	if !maps.Equal(got, want) {
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: cached plan gives %v (present %v), a fresh one %v", k, g, ok, v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s = %v only in the cached plan", k, v)
			}
		}
	}
	st := vethtest.EthtoolS(t, "", dev)
	for key, stat := range map[string]string{
		`xdp_nic_rx_xdp_packets_total{action="drop",device="` + dev + `",queue="0"}`: "rx_queue_0_xdp_drops",
		`xdp_nic_xdp_xmit_packets_total{device="` + dev + `",queue="7"}`:             "tx_queue_7_xdp_xmit",
	} {
		if v, ok := got[key]; !ok || v != float64(st[stat]) {
			t.Errorf("%s = %v (present %v), ethtool -S %s says %d", key, v, ok, stat, st[stat])
		}
	}
	if st["rx_queue_0_xdp_drops"] != 1000 {
		t.Errorf("ethtool -S: rx_queue_0_xdp_drops = %d, want the 1000 frames sent", st["rx_queue_0_xdp_drops"])
	}
}

// deviceSeries flattens families into name{labels} -> value.
func deviceSeries(mfs exportertest.Families) map[string]float64 {
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			out[name+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// TestNICVethDrops floods a veth with XDP_PASS from two CPUs: the frames
// its XDP ring cannot take are host-resource drops, which veth counts only
// in rtnl_link_stats64 rx_dropped. The collector's drop signal for the
// device comes from that field and equals what `ip -s link` says at the
// same moment; with XDP frames (live or broadcast, the generator's XDP
// path) every frame is either received or dropped there.
func TestNICVethDrops(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	vethtest.AttachVerdict(t, pair, xdptest.Pass)
	c, err := NewEthtoolCollector(EthtoolConfig{Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile(regexp.QuoteMeta(pair.Host.Name)), nil)}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the generator")
	choice, err := g.Choose("")
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	xdpFrames := choice.Method != trafficgen.Packet

	const frames = 20_000
	vethtest.Flood(t, pair, frames)
	var rx map[string]uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rx, _ = vethtest.IPStats64(t, "", pair.Host.Name)
		if !xdpFrames || rx["packets"]+rx["dropped"] == frames || time.Now().After(deadline) {
			break
		}
	}
	if xdpFrames && rx["packets"]+rx["dropped"] != frames {
		t.Fatalf("%s: %d received + %d dropped, want the %d frames sent", pair.Host.Name, rx["packets"], rx["dropped"], frames)
	}
	mfs := gather(t, c)
	mfs.Value(t, "xdp_nic_signal_source_info", "device", pair.Host.Name, "family", "xdp_nic_rx_host_drops_total", "source", "link_stats64", "stat", "rx_dropped")
	if got := mfs.Value(t, "xdp_nic_rx_host_drops_total", "device", pair.Host.Name); got != float64(rx["dropped"]) {
		t.Errorf("drop signal %v, ip -s link says rx dropped %d", got, rx["dropped"])
	}
	t.Logf("%d frames: %d received, %d dropped (generator: %s)", frames, rx["packets"], rx["dropped"], choice)
}

// TestNICVirtioStandardDrops reads the drop signal of this machine's
// virtio_net NIC (the matrix guests have two, the development VM one), a
// driver that names no drop: it comes from the kernel's standard counters,
// qstats rx-hw-drop-overruns where the device reports them (virtio 1.3
// device statistics) and rtnl_link_stats64 rx_missed_errors otherwise,
// each probed as the collector probes it and equal to what the kernel
// says at the same moment.
func TestNICVirtioStandardDrops(t *testing.T) {
	testenv.Privileged(t)
	dev := ""
	links, _ := filepath.Glob("/sys/class/net/*/device/driver")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && filepath.Base(target) == "virtio_net" {
			dev = filepath.Base(filepath.Dir(filepath.Dir(l)))
			break
		}
	}
	if dev == "" {
		testenv.Unavailable(t, "no virtio_net NIC on this machine")
		return
	}
	c, err := NewEthtoolCollector(EthtoolConfig{Filter: Filter{Devices: newDeviceFilter(regexp.MustCompile(regexp.QuoteMeta(dev)), nil)}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	std, err := c.(*ethtoolCollector).src.Qstats()
	overruns := false
	ifi, _ := net.InterfaceByName(dev)
	for _, q := range std {
		overruns = overruns || int(q.Ifindex) == ifi.Index && q.Present[qstatDropOverruns]
	}
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatal(err)
	}
	mfs := gather(t, c)
	rx, _ := vethtest.IPStats64(t, "", dev)
	if overruns {
		mfs.Value(t, "xdp_nic_rx_host_drops_total", "device", dev)
		mfs.Value(t, "xdp_nic_signal_source_info", "device", dev, "family", "xdp_nic_rx_host_drops_total", "source", "netdev_qstats", "stat", "rx-hw-drop-overruns")
		t.Logf("%s: drops from qstats rx-hw-drop-overruns (the device reports its statistics)", dev)
		return
	}
	mfs.Value(t, "xdp_nic_signal_source_info", "device", dev, "family", "xdp_nic_rx_host_drops_total", "source", "link_stats64", "stat", "rx_missed_errors")
	if got := mfs.Value(t, "xdp_nic_rx_host_drops_total", "device", dev); got != float64(rx["missed_errors"]) {
		t.Errorf("%s: drop signal %v, ip -s link missed %d", dev, got, rx["missed_errors"])
	}
	if ms := mfs.Series("xdp_nic_port_packets_total", "device", dev); len(ms) != 0 {
		t.Errorf("%s: port packets from virtio_net, which fills no eth-mac counter: %v", dev, ms)
	}
}
