package collector

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

func TestRxqConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  RxqConfig
		want string
	}{
		{"no device", RxqConfig{}, "no device given"},
		{"bad action", RxqConfig{Devices: []string{"lo"}, Action: "bounce"}, `unknown action "bounce"`},
		{"bad mode", RxqConfig{Devices: []string{"lo"}, Mode: "offload"}, `unknown mode "offload"`},
		{"redirect without target", RxqConfig{Devices: []string{"lo"}, Action: "redirect"}, "needs --collector.rxq.redirect-device"},
		{"target without redirect", RxqConfig{Devices: []string{"lo"}, RedirectDevice: "lo"}, "only used with --collector.rxq.action=redirect"},
		{"twice", RxqConfig{Devices: []string{"lo", "lo"}}, "device lo given twice"},
		{"missing device", RxqConfig{Devices: []string{"nosuchdev0"}}, "device nosuchdev0"},
		{"missing target", RxqConfig{Devices: []string{"lo"}, Action: "redirect", RedirectDevice: "nosuchdev0"}, "redirect device nosuchdev0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewRxqCollector(tc.cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				c.Close()
				t.Fatalf("no error, want one saying %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// xdpDrop loads a bare XDP_DROP program.
func xdpDrop(t testing.TB) *ebpf.Program {
	t.Helper()
	return vethtest.Verdict(t, "xdpt_drop", xdptest.Drop)
}

// dropOnPeer attaches a bare XDP_DROP to the pair's generator end, inside
// its namespace: veth delivers XDP frames (XDP_TX back, or a redirect) to a
// peer only when the peer runs XDP, and the peer's counters then count them.
func dropOnPeer(t testing.TB, pair *vethns.Pair) {
	t.Helper()
	prog := xdpDrop(t)
	var l link.Link
	err := pair.Do(func() (err error) {
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: pair.Peer.Index})
		return err
	})
	testenv.Check(t, err, "attaching XDP_DROP to the peer")
	t.Cleanup(func() { l.Close() })
}

// vethStats sums veth's per-queue ethtool counters rx_queue_N_<stat> of dev
// (inside pair's namespace when inNS), per queue.
func vethStats(t testing.TB, pair *vethns.Pair, dev string, inNS bool, stat string, queues int) []uint64 {
	t.Helper()
	netns := ""
	if inNS {
		netns = pair.Namespace
	}
	stats := vethtest.EthtoolS(t, netns, dev)
	out := make([]uint64, queues)
	for q := range out {
		name := fmt.Sprintf("rx_queue_%d_%s", q, stat)
		v, ok := stats[name]
		if !ok {
			t.Fatalf("%s has no ethtool stat %s", dev, name)
		}
		out[q] = v
	}
	return out
}

// rxqCells returns the packets_total samples of dev as queue -> cpu -> value.
func rxqCells(mfs exportertest.Families, family, dev string) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	mf := mfs[family]
	for _, m := range mf.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["device"] != dev {
			continue
		}
		if out[l["queue"]] == nil {
			out[l["queue"]] = map[string]uint64{}
		}
		out[l["queue"]][l["cpu"]] = uint64(m.GetCounter().GetValue())
	}
	return out
}

// TestRxqActions sends exactly N frames over two RX queues into a device
// running the rxq program under each action and checks that the exporter's
// queue x CPU counters sum to N, that each queue ran on the CPU that sent
// to it (veth schedules NAPI on the sending CPU), that veth's own per-queue
// XDP counters agree queue by queue, and that the frames went where the
// action sends them.
func TestRxqActions(t *testing.T) {
	const n = 100_000
	for _, tc := range []struct {
		action string
		read   bool
		check  bool   // --collector.rxq.check-ifindex
		stat   string // veth's per-queue counter of the action
	}{
		{"pass", false, false, "xdp_packets"},
		{"pass", false, true, "xdp_packets"},
		{"drop", false, false, "xdp_drops"},
		{"drop", true, false, "xdp_drops"},
		{"tx", false, false, "xdp_tx"},
		{"redirect", false, false, "xdp_redirect"},
	} {
		t.Run(fmt.Sprintf("%s/read=%v/check-ifindex=%v", tc.action, tc.read, tc.check), func(t *testing.T) {
			pair := vethtest.Pair(t, 2)
			cfg := RxqConfig{Devices: []string{pair.Host.Name}, Action: tc.action, Read: tc.read, CheckIfindex: tc.check}
			var target *vethns.Pair
			switch tc.action {
			case "tx":
				dropOnPeer(t, pair)
			case "redirect":
				// Two queues, so each sending CPU has its own ring on
				// the target's far end (veth picks it by CPU).
				target = vethtest.Pair(t, 2)
				dropOnPeer(t, target)
				cfg.RedirectDevice = target.Host.Name
			}
			c, err := NewRxqCollector(cfg, slog.New(slog.DiscardHandler))
			testenv.Check(t, err, "starting the rxq collector")
			closed := false
			defer func() {
				if !closed {
					c.Close()
				}
			}()

			vethtest.SendExactly(t, pair, n)
			mfs := gather(t, c)

			info := mfs.Value(t, "xdp_rxq_info", "device", pair.Host.Name, "action", tc.action,
				"attach_mode", "native", "read", fmt.Sprint(tc.read), "prog_id", fmt.Sprint(vethtest.AttachedXDP(t, pair.Host.Name)))
			if info != 1 {
				t.Errorf("xdp_rxq_info = %v, want 1", info)
			}
			perQueue := checkRxqCells(t, mfs, pair.Host.Name, n)
			checkRxqIssues(t, mfs, pair.Host.Name, tc.check)

			host := vethStats(t, pair, pair.Host.Name, false, "xdp_packets", 2)
			acted := vethStats(t, pair, pair.Host.Name, false, tc.stat, 2)
			for q := range 2 {
				if host[q] != perQueue[q] || acted[q] != perQueue[q] {
					t.Errorf("queue %d: veth rx_queue_%d_xdp_packets %d, rx_queue_%d_%s %d; rxq counted %d",
						q, q, host[q], q, tc.stat, acted[q], perQueue[q])
				}
			}
			// Where the frames went: back to the generator's end for tx,
			// to the target pair's far end for redirect.
			switch tc.action {
			case "tx":
				checkArrived(t, vethStats(t, pair, pair.Peer.Name, true, "xdp_drops", 2), tc.action, n)
			case "redirect":
				checkArrived(t, vethStats(t, target, target.Peer.Name, true, "xdp_drops", 2), tc.action, n)
			}

			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			closed = true
			if id := vethtest.AttachedXDP(t, pair.Host.Name); id != 0 {
				t.Errorf("XDP program id %d still on %s after Close", id, pair.Host.Name)
			}
		})
	}
}

// checkRxqCells checks that dev's queue x CPU counters of n packets sum
// to n, split evenly over two queues each on its own CPU, with the bytes of
// minimum-size frames; it returns the packets per queue.
func checkRxqCells(t *testing.T, mfs exportertest.Families, dev string, n uint64) []uint64 {
	t.Helper()
	cells := rxqCells(mfs, "xdp_rxq_packets_total", dev)
	bytes := rxqCells(mfs, "xdp_rxq_bytes_total", dev)
	var total uint64
	perQueue := make([]uint64, 2)
	for q, cpus := range cells {
		for cpu, v := range cpus {
			total += v
			qi, err := strconv.Atoi(q)
			if err != nil || qi > 1 {
				t.Fatalf("unexpected queue label %q", q)
			}
			perQueue[qi] += v
			if cpu != q {
				t.Errorf("queue %s counted %d packets on CPU %s; veth runs queue q on CPU q here", q, v, cpu)
			}
			if b := bytes[q][cpu]; b != v*trafficgen.MinFrameSize {
				t.Errorf("queue %s CPU %s: %d bytes for %d packets of %d bytes", q, cpu, b, v, trafficgen.MinFrameSize)
			}
		}
	}
	if total != n {
		t.Errorf("queue x CPU counters sum to %d, want %d: %v", total, n, cells)
	}
	if perQueue[0] != n/2 || perQueue[1] != n/2 {
		t.Errorf("per queue %v, want %d each", perQueue, n/2)
	}
	return perQueue
}

// checkRxqIssues checks that dev counted no issue, and that the ifindex
// issue exists only when checked.
func checkRxqIssues(t *testing.T, mfs exportertest.Families, dev string, checked bool) {
	t.Helper()
	if v := mfs.Value(t, "xdp_rxq_issues_total", "device", dev, "reason", "queue_out_of_range"); v != 0 {
		t.Errorf("queue_out_of_range issues = %v, want 0", v)
	}
	var ifindexIssues []float64
	for _, m := range mfs["xdp_rxq_issues_total"].GetMetric() {
		if exportertest.Matches(m, "device", dev, "reason", "ifindex_mismatch") {
			ifindexIssues = append(ifindexIssues, m.GetCounter().GetValue())
		}
	}
	if want := []float64{0}; checked && !slices.Equal(ifindexIssues, want) || !checked && ifindexIssues != nil {
		t.Errorf("ifindex_mismatch issues %v with check-ifindex=%v", ifindexIssues, checked)
	}
}

// checkArrived checks that the n frames of an action arrived where it
// sends them, per queue in arrived.
func checkArrived(t *testing.T, arrived []uint64, action string, n uint64) {
	t.Helper()
	var sum uint64
	for _, v := range arrived {
		sum += v
	}
	if sum != n {
		t.Errorf("%d frames arrived at the %s destination, want %d", sum, action, n)
	}
}

// TestRxqQueueIssue sizes the per-queue counters for one queue on a
// two-queue device: queue 1's frames become queue_out_of_range issues,
// xdp_rxq_info's issue-pps, and the verdict still applies to them.
func TestRxqQueueIssue(t *testing.T) {
	const n = 100_000
	pair := vethtest.Pair(t, 2)
	c, err := NewRxqCollector(RxqConfig{Devices: []string{pair.Host.Name}, Action: "drop", Queues: 1}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "starting the rxq collector")
	defer c.Close()
	vethtest.SendExactly(t, pair, n)
	mfs := gather(t, c)
	if v := mfs.Value(t, "xdp_rxq_packets_total", "device", pair.Host.Name, "queue", "0"); v != n/2 {
		t.Errorf("queue 0 counted %v, want %d", v, n/2)
	}
	if v := mfs.Value(t, "xdp_rxq_issues_total", "device", pair.Host.Name, "reason", "queue_out_of_range"); v != n/2 {
		t.Errorf("queue_out_of_range issues %v, want %d", v, n/2)
	}
	drops := vethStats(t, pair, pair.Host.Name, false, "xdp_drops", 2)
	if drops[0]+drops[1] != n {
		t.Errorf("veth dropped %v, want %d in all", drops, n)
	}
}

// TestRxqForeignProgram puts another XDP program on the device, once
// through netlink (as ip link set xdp does) and once through a bpf_link (as
// the exporter itself and xdp-tools do): without force the collector
// refuses, naming the program; with force it replaces it and counts.
func TestRxqForeignProgram(t *testing.T) {
	for _, how := range []string{"netlink", "bpf_link"} {
		t.Run(how, func(t *testing.T) {
			pair := vethtest.Pair(t, 2)
			foreign := xdpDrop(t)
			switch how {
			case "netlink":
				l, err := netlink.LinkByName(pair.Host.Name)
				if err != nil {
					t.Fatal(err)
				}
				testenv.Check(t, netlink.LinkSetXdpFd(l, foreign.FD()), "attaching XDP through netlink")
				t.Cleanup(func() { _ = netlink.LinkSetXdpFd(l, -1) })
			case "bpf_link":
				l, err := link.AttachXDP(link.XDPOptions{Program: foreign, Interface: pair.Host.Index})
				testenv.Check(t, err, "attaching XDP through bpf_link")
				t.Cleanup(func() { l.Close() })
			}
			id := vethtest.AttachedXDP(t, pair.Host.Name)
			if id == 0 {
				t.Fatal("foreign program not attached")
			}

			cfg := RxqConfig{Devices: []string{pair.Host.Name}}
			_, err := NewRxqCollector(cfg, slog.New(slog.DiscardHandler))
			want := fmt.Sprintf("device %s already has XDP program id %d attached (native mode); refusing to replace it without --collector.rxq.force", pair.Host.Name, id)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one saying %q", err, want)
			}
			if now := vethtest.AttachedXDP(t, pair.Host.Name); now != id {
				t.Fatalf("refusing changed the device's program from %d to %d", id, now)
			}

			cfg.Force = true
			c, err := NewRxqCollector(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatalf("with force: %v", err)
			}
			defer c.Close()
			const n = 10_000
			vethtest.SendExactly(t, pair, n)
			mfs := gather(t, c)
			ours := mfs.Value(t, "xdp_rxq_info", "device", pair.Host.Name)
			if ours != 1 || vethtest.AttachedXDP(t, pair.Host.Name) == id {
				t.Errorf("device still runs the foreign program %d", id)
			}
			var total float64
			for _, m := range mfs["xdp_rxq_packets_total"].GetMetric() {
				total += m.GetCounter().GetValue()
			}
			if total != n {
				t.Errorf("counted %v frames after replacing, want %d", total, n)
			}
		})
	}
}

// TestRxqGeneric attaches in generic (skb) mode. veth hands frames sent
// with XDP to a peer only when the peer's NAPI is on, which without native
// XDP takes GRO; generic XDP then sees each frame as an skb. Its
// rx_queue_index is the queue the driver recorded in the skb, and veth
// records none on this path, so every frame counts on queue 0: the total is
// exact, the queue split is the kernel's.
func TestRxqGeneric(t *testing.T) {
	const n = 100_000
	pair := vethtest.Pair(t, 2)
	e, err := ethtool.NewEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	testenv.Check(t, e.Change(pair.Host.Name, map[string]bool{"rx-gro": true}), "enabling GRO on veth")

	c, err := NewRxqCollector(RxqConfig{Devices: []string{pair.Host.Name}, Action: "drop", Mode: "generic"}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "attaching rxq in generic mode")
	defer c.Close()
	l, err := netlink.LinkByName(pair.Host.Name)
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x == nil || x.AttachMode != nl.XDP_ATTACHED_SKB {
		t.Fatalf("device XDP state %+v, want attached in generic (skb) mode", x)
	}
	vethtest.SendExactly(t, pair, n)
	mfs := gather(t, c)
	if v := mfs.Value(t, "xdp_rxq_info", "device", pair.Host.Name, "attach_mode", "generic"); v != 1 {
		t.Errorf("xdp_rxq_info{attach_mode=generic} = %v", v)
	}
	var total uint64
	for _, cpus := range rxqCells(mfs, "xdp_rxq_packets_total", pair.Host.Name) {
		for _, v := range cpus {
			total += v
		}
	}
	if total != n {
		t.Errorf("generic mode counted %d frames, want %d", total, n)
	}
}

// TestRxqForeignAfterStart: once the collector runs, another attach is
// refused by the kernel and counting goes on; a detach of our link (what
// `bpftool link detach` does) is reported on every scrape after it.
func TestRxqForeignAfterStart(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	c, err := NewRxqCollector(RxqConfig{Devices: []string{pair.Host.Name}, Action: "drop"}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "starting the rxq collector")
	defer c.Close()

	l, err := netlink.LinkByName(pair.Host.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetXdpFd(l, xdpDrop(t).FD()); err == nil {
		t.Fatal("the kernel let a netlink attach replace the rxq program's bpf_link")
	}
	const n = 10_000
	vethtest.SendExactly(t, pair, n)
	if err := c.Update(context.Background(), NewLinkSnapshot(), make(chan prometheus.Metric, 1024)); err != nil {
		t.Fatalf("update after a refused foreign attach: %v", err)
	}
	if got := sumCells(rxqCells(gather(t, c), "xdp_rxq_packets_total", pair.Host.Name)); got != n {
		t.Fatalf("counted %d frames, want %d", got, n)
	}

	it := new(link.Iterator)
	defer it.Close()
	detached := false
	for it.Next() {
		info, err := it.Link.Info()
		if err == nil && info.Type == link.XDPType && info.XDP().Ifindex == uint32(pair.Host.Index) {
			testenv.Check(t, it.Link.Detach(), "detaching the rxq bpf_link")
			detached = true
		}
	}
	if !detached {
		t.Fatal("found no XDP bpf_link on the device")
	}
	err = c.Update(context.Background(), NewLinkSnapshot(), make(chan prometheus.Metric, 1024))
	if err == nil || !strings.Contains(err.Error(), "no longer attached") {
		t.Fatalf("update after our link was detached: %v, want an error saying so", err)
	}
}

func sumCells(cells map[string]map[string]uint64) uint64 {
	var sum uint64
	for _, perCPU := range cells {
		for _, v := range perCPU {
			sum += v
		}
	}
	return sum
}
