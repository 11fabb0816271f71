// Package vethtest holds the test helpers around vethns and trafficgen: a
// lab pair per test, removed when it ends, and exact sends. It imports
// testing, so only tests import it; the lab tool and the exporter link
// vethns and trafficgen without it.
package vethtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/rxqobserve"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// Pair makes a pair with unique names for one test and removes it when
// the test ends. It skips, or fails in CI, without the privileges needed.
func Pair(t testing.TB, queues int) *vethns.Pair {
	t.Helper()
	testenv.Privileged(t)
	id := vethns.UniqueID()
	p, err := vethns.NewPair(vethns.PairConfig{
		Namespace: "xdpt-" + id,
		Host:      "xt" + id + "d", // the device under test
		Peer:      "xt" + id + "g", // the generator's end
		Queues:    queues,
	})
	testenv.Check(t, err, "creating netns and veth pair")
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("removing lab pair: %v", err)
		}
	})
	return p
}

// AttachVerdict attaches to the DUT end, through a bpf_link, a program that
// returns verdict for every frame, and detaches it when the test ends. On
// veth the receiving end runs NAPI, and so accepts frames from the
// generator, only while an XDP program is attached.
func AttachVerdict(t testing.TB, p *vethns.Pair, verdict uint32) {
	t.Helper()
	AttachVerdictTo(t, p.Host.Index, verdict)
}

// AttachVerdictTo attaches to ifindex of the calling thread's namespace
// a program that returns verdict for every frame, and returns it; both go
// when the test ends.
func AttachVerdictTo(t testing.TB, ifindex int, verdict uint32) *ebpf.Program {
	t.Helper()
	prog := Verdict(t, "xdpt_verdict", verdict)
	AttachProgram(t, ifindex, prog)
	return prog
}

// Verdict loads a program called name that returns verdict for every
// frame (xdptest.Verdict), closed when the test ends.
func Verdict(t testing.TB, name string, verdict uint32) *ebpf.Program {
	t.Helper()
	prog, err := xdptest.Verdict(name, verdict)
	testenv.Check(t, err, "loading an XDP program")
	t.Cleanup(func() { prog.Close() })
	return prog
}

// AttachProgram attaches prog to ifindex of the calling thread's
// namespace through a bpf_link, detached when the test ends.
func AttachProgram(t testing.TB, ifindex int, prog *ebpf.Program) {
	t.Helper()
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
	testenv.Check(t, err, "attaching XDP")
	t.Cleanup(func() { l.Close() })
}

// AttachWithIP attaches section sec of the object file obj to dev in native
// mode the way a user does, with iproute2 (`ip -force link set dev DEV
// xdpdrv obj OBJ sec SEC`, replacing what is there), and returns the new
// program's id. It detaches whatever dev holds when the test ends.
func AttachWithIP(t testing.TB, dev, obj, sec string) uint32 {
	t.Helper()
	if out, err := exec.Command("ip", "-force", "link", "set", "dev", dev, "xdpdrv", "obj", obj, "sec", sec).CombinedOutput(); err != nil {
		t.Fatalf("ip link set dev %s xdpdrv obj %s: %v\n%s", dev, obj, err, out)
	}
	t.Cleanup(func() {
		// The device may be gone with its pair already.
		_ = exec.Command("ip", "link", "set", "dev", dev, "xdpdrv", "off").Run()
	})
	id := AttachedXDP(t, dev)
	if id == 0 {
		t.Fatalf("ip attached no XDP program to %s", dev)
	}
	return id
}

// AttachedXDP returns the id of the XDP program attached to dev, 0 for none.
func AttachedXDP(t testing.TB, dev string) uint32 {
	t.Helper()
	l, err := netlink.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return x.ProgId
	}
	return 0
}

// SendExactly makes the generator send n frames from pair's peer to its
// host end, failing the test unless the host end took exactly n: from
// CPUs 0 and 1 into a pair with two queues or more (one CPU a queue, as
// veth maps them), from CPU 0 alone into one queue, which two CPUs would
// flood.
func SendExactly(t testing.TB, pair *vethns.Pair, n uint64) {
	t.Helper()
	SendSized(t, pair, n, trafficgen.MinFrameSize)
}

// SendSized is SendExactly with frames of size bytes.
func SendSized(t testing.TB, pair *vethns.Pair, n uint64, size int) {
	t.Helper()
	send(t, pair, n, size, false)
}

// exactCPUs are the CPUs an exact send uses into pair: one a queue.
func exactCPUs(pair *vethns.Pair) []int {
	if pair.Queues < 2 {
		return []int{0}
	}
	return []int{0, 1}
}

// Flood sends n frames from CPUs 0 and 1, whatever the queues, and lets
// the host end lose what its XDP ring cannot take.
func Flood(t testing.TB, pair *vethns.Pair, n uint64) {
	t.Helper()
	send(t, pair, n, trafficgen.MinFrameSize, true)
}

func send(t testing.TB, pair *vethns.Pair, n uint64, size int, mayLose bool) {
	t.Helper()
	cpus := []int{0, 1}
	if !mayLose {
		cpus = exactCPUs(pair)
	}
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the traffic generator")
	defer g.Close()
	sent, err := g.Run(context.Background(), trafficgen.Config{
		NS: pair.NS, Ifindex: pair.Peer.Index,
		SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
		Count: n, CPUs: cpus, Size: size, MayLose: mayLose,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent != n {
		t.Fatalf("generator sent %d frames, want %d", sent, n)
	}
	t.Logf("generator: %s", g.Choice())
}

// EthtoolS runs the ethtool(8) command, `ethtool -S dev`, inside the named
// network namespace when netns is not empty, and returns its statistics
// by name: an oracle for the kernel's counters that shares no code with
// the collector (the exporter's own ioctls) or its libraries.
func EthtoolS(t testing.TB, netns, dev string) map[string]uint64 {
	t.Helper()
	args := []string{"ethtool", "-S", dev}
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	stats := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		if !ok {
			continue // the "NIC statistics:" header
		}
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			t.Fatalf("%s: stat %q: %v", strings.Join(args, " "), name, err)
		}
		stats[name] = v
	}
	if len(stats) == 0 {
		t.Fatalf("%s printed no statistics:\n%s", strings.Join(args, " "), out)
	}
	return stats
}

// IPStats64 runs `ip -j -s -s link show dev` inside the named network
// namespace when netns is not empty and returns its stats64 object: the
// counters iproute2 reads from RTM_GETLINK's IFLA_STATS64, an oracle that
// shares no code with the exporter's RTM_GETSTATS dump. Keys are ip's:
// rx["packets"], rx["dropped"], rx["missed_errors"], tx["bytes"]...
func IPStats64(t testing.TB, netns, dev string) (rx, tx map[string]uint64) {
	t.Helper()
	args := []string{"ip", "-j", "-s", "-s", "link", "show", "dev", dev}
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	var links []struct {
		Stats64 struct {
			Rx map[string]uint64 `json:"rx"`
			Tx map[string]uint64 `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return links[0].Stats64.Rx, links[0].Stats64.Tx
}

// ObserverLink is a tracing link of the exporter's observer program, with
// the program it traces (0 where the kernel does not say: before 5.13).
type ObserverLink struct {
	ID     link.ID
	Target uint32
}

// ObserverLinks lists the tracing links whose program is the observer
// (rxqobserve), as `bpftool link` shows them.
func ObserverLinks(t testing.TB) []ObserverLink {
	t.Helper()
	var out []ObserverLink
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Type != link.TracingType {
			continue
		}
		prog, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			continue // gone since the listing
		}
		pi, err := prog.Info()
		prog.Close()
		if err != nil {
			t.Fatal(err)
		}
		if pi.Name == rxqobserve.ObserverProgObserve {
			l := ObserverLink{ID: info.ID}
			if tr := info.Tracing(); tr != nil {
				l.Target = tr.TargetObjectId
			}
			out = append(out, l)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TCProgram loads a sched_cls program called name that hands every packet
// on (xdptest.TC), closed when the test ends.
func TCProgram(t testing.TB, name string) *ebpf.Program {
	t.Helper()
	prog, err := xdptest.TC(name)
	testenv.Check(t, err, "loading a sched_cls program")
	t.Cleanup(func() { prog.Close() })
	return prog
}

// AttachTC attaches prog as a direct-action cls_bpf filter of preference
// prio on a hook (ingress or egress) of ifindex, as `tc filter add dev
// DEV ingress prio P bpf da` does, adding the clsact qdisc the first time;
// the qdisc, and its filters with it, go when the test ends.
func AttachTC(t testing.TB, ifindex int, direction string, prio uint16, prog *ebpf.Program) {
	t.Helper()
	qdisc := &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
	if err := netlink.QdiscReplace(qdisc); err != nil {
		t.Fatalf("adding the clsact qdisc: %v", err)
	}
	t.Cleanup(func() { _ = netlink.QdiscDel(qdisc) })
	parent := uint32(netlink.HANDLE_MIN_INGRESS)
	if direction == "egress" {
		parent = netlink.HANDLE_MIN_EGRESS
	}
	err := netlink.FilterAdd(&netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: ifindex, Parent: parent, Priority: prio, Protocol: unix.ETH_P_ALL},
		Fd:           prog.FD(),
		Name:         "xdpt",
		DirectAction: true,
	})
	if err != nil {
		t.Fatalf("adding a %s bpf filter: %v", direction, err)
	}
}
