package trafficgen_test

import (
	"testing"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestExactCount sends a known number of frames from both CPUs and checks
// that veth's own per-queue XDP counters on the receiving end, as
// ethtool(8) prints them, saw exactly that many.
func TestExactCount(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdict(t, pair, xdptest.Drop)

	const n = 100_000
	vethtest.SendExactly(t, pair, n)
	stats := vethtest.EthtoolS(t, "", pair.Host.Name)
	q0, q1 := stats["rx_queue_0_xdp_drops"], stats["rx_queue_1_xdp_drops"]
	if q0+q1 != n || q0 == 0 || q1 == 0 {
		t.Fatalf("veth XDP drops per queue = %d + %d, want a split summing to %d", q0, q1, n)
	}
}
