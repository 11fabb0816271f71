package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// TestPair makes a pair with unique names for one test and removes it when
// the test ends. It skips, or fails in CI, without the privileges needed.
func TestPair(t testing.TB, queues int) *Pair {
	t.Helper()
	testenv.Privileged(t)
	id := UniqueID()
	p, err := NewPair(PairConfig{
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

// UniqueID returns 8 hex characters, short enough for interface names.
func UniqueID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// XDP verdicts (enum xdp_action) for AttachVerdict.
const (
	XDPDrop uint32 = 1
	XDPPass uint32 = 2
)

// AttachVerdict attaches to the DUT end, through a bpf_link, a program that
// returns verdict for every frame, and detaches it when the test ends. On
// veth the receiving end runs NAPI, and so accepts frames from the
// generator, only while an XDP program is attached.
func (p *Pair) AttachVerdict(t testing.TB, verdict uint32) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(verdict)), asm.Return()},
	})
	testenv.Check(t, err, "loading an XDP program")
	defer prog.Close() // the link keeps its own reference
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: p.Host.Index})
	testenv.Check(t, err, "attaching XDP to "+p.Host.Name)
	t.Cleanup(func() { l.Close() })
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
