package trafficgen

import (
	"context"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/netlab"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// SendExactly makes the generator send n frames from CPUs 0 and 1 of pair's
// peer to its host end, failing the test unless exactly n went out.
func SendExactly(t testing.TB, pair *netlab.Pair, n uint64) {
	t.Helper()
	g, err := New()
	testenv.Check(t, err, "loading the traffic generator")
	defer g.Close()
	sent, err := g.Run(context.Background(), Config{
		NS: pair.NS, Ifindex: pair.Peer.Index,
		SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
		Count: n, CPUs: []int{0, 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent != n {
		t.Fatalf("generator sent %d frames, want %d", sent, n)
	}
}
