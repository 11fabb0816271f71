package trafficgen_test

import (
	"context"
	"testing"

	"github.com/safchain/ethtool"

	"github.com/xdp-exporter/xdp_exporter/internal/labtest"
	"github.com/xdp-exporter/xdp_exporter/internal/netlab"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/trafficgen"
)

// TestExactCount sends a known number of frames from both CPUs and checks
// that veth's own per-queue XDP counters on the receiving end saw exactly
// that many.
func TestExactCount(t *testing.T) {
	pair := labtest.Pair(t, 2)
	labtest.AttachVerdict(t, pair, netlab.XDPDrop)

	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the generator")
	defer g.Close()

	const n = 100_000
	sent, err := g.Run(context.Background(), trafficgen.Config{
		NS: pair.NS, Ifindex: pair.Peer.Index,
		SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
		Count: n, CPUs: []int{0, 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent != n {
		t.Fatalf("generator counted %d frames, want %d", sent, n)
	}

	e, err := ethtool.NewEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	stats, err := e.Stats(pair.Host.Name)
	if err != nil {
		t.Fatal(err)
	}
	q0, q1 := stats["rx_queue_0_xdp_drops"], stats["rx_queue_1_xdp_drops"]
	if q0+q1 != n || q0 == 0 || q1 == 0 {
		t.Fatalf("veth XDP drops per queue = %d + %d, want a split summing to %d", q0, q1, n)
	}
}
