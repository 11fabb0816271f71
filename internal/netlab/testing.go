package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

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

// AttachVerdict attaches to the DUT end, through a bpf_link, a program that
// returns verdict for every frame, and detaches it when the test ends. On
// veth the receiving end runs NAPI, and so accepts frames from the
// generator, only while an XDP program is attached.
func (p *Pair) AttachVerdict(t testing.TB, verdict uint32) {
	t.Helper()
	l, err := AttachVerdictTo(p.Host.Index, verdict)
	testenv.Check(t, err, p.Host.Name)
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
