package trafficgen_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// TestExactCount sends a known number of frames from both CPUs with every
// method the kernel takes and checks that veth's own per-queue XDP
// counters on the receiving end, as ethtool(8) prints them, saw exactly
// that many. A method the kernel refuses must be refused as Choose says,
// with the kernel's answer and the methods that do work.
func TestExactCount(t *testing.T) {
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the traffic generator")
	defer g.Close()
	taken := 0
	for _, m := range methods() {
		t.Run(string(m), func(t *testing.T) {
			c, err := g.Choose(m)
			if err != nil {
				if !strings.Contains(err.Error(), "the kernel refuses it") || !strings.Contains(err.Error(), "methods that work here") {
					t.Fatalf("Choose(%s) = %v, want a refusal naming the methods that work", m, err)
				}
				t.Logf("this kernel refuses %s: %v", m, err)
				return
			}
			taken++
			if c.Method != m {
				t.Fatalf("Choose(%s) = %v", m, c)
			}
			pair := vethtest.Pair(t, 2)
			vethtest.AttachVerdict(t, pair, xdptest.Drop)
			const n = 100_000
			for round := range 2 { // the second reuses the broadcast loop
				start := time.Now()
				sent, err := g.Run(context.Background(), trafficgen.Config{
					NS: pair.NS, Ifindex: pair.Peer.Index, Method: m,
					SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
					Count: n, CPUs: []int{0, 1},
				})
				took := time.Since(start)
				if err != nil || sent != n {
					t.Fatalf("round %d: sent %d, %v; want %d", round, sent, err, n)
				}
				if got := g.Choice(); got.Method != m {
					t.Fatalf("the run used %v, want %s", got, m)
				}
				stats := vethtest.EthtoolS(t, "", pair.Host.Name)
				q0, q1 := stats["rx_queue_0_xdp_drops"], stats["rx_queue_1_xdp_drops"]
				if q0+q1 != n*uint64(round+1) || q0 == 0 || q1 == 0 {
					t.Fatalf("round %d: veth XDP drops per queue = %d + %d, want a split summing to %d", round, q0, q1, n*uint64(round+1))
				}
				t.Logf("%s: %d frames in %v", m, n, took)
			}
		})
	}
	if taken == 0 {
		t.Fatal("the kernel takes no method at all")
	}
}

// TestPacedAndOpenEnded sends at a set rate until the context ends, with
// every method the kernel takes: the count returned is the count the
// receiver saw, and the rate is the one asked for.
func TestPacedAndOpenEnded(t *testing.T) {
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the traffic generator")
	defer g.Close()
	for _, m := range methods() {
		t.Run(string(m), func(t *testing.T) {
			if _, err := g.Choose(m); err != nil {
				t.Logf("this kernel refuses %s: %v", m, err)
				return
			}
			pair := vethtest.Pair(t, 2)
			vethtest.AttachVerdict(t, pair, xdptest.Drop)
			const rate, d = 100_000, 500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			sent, err := g.Run(ctx, trafficgen.Config{
				NS: pair.NS, Ifindex: pair.Peer.Index, Method: m,
				SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
				Rate: rate, CPUs: []int{0, 1},
			})
			if err != nil {
				t.Fatal(err)
			}
			stats := vethtest.EthtoolS(t, "", pair.Host.Name)
			if got := stats["rx_queue_0_xdp_drops"] + stats["rx_queue_1_xdp_drops"]; got != sent {
				t.Fatalf("sent %d, the receiver dropped %d", sent, got)
			}
			// Paced in slices of 100 ms (live) or 1 ms ticks: never more
			// than a fifth over the frames due, and within a fifth under
			// them where the method, unpaced, sends ten times the rate
			// here (under an emulator the pacing's sleeps overrun).
			want := rate * d.Seconds()
			if float64(sent) > 1.2*want {
				t.Fatalf("sent %d frames in %v at %d/s, want at most %.0f", sent, d, rate, 1.2*want)
			}
			ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			unpaced, err := g.Run(ctx, trafficgen.Config{
				NS: pair.NS, Ifindex: pair.Peer.Index, Method: m,
				SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr, CPUs: []int{0, 1},
			})
			if err != nil {
				t.Fatal(err)
			}
			if capable := float64(unpaced)/0.2 >= 10*rate; capable && float64(sent) < 0.8*want {
				t.Fatalf("sent %d frames in %v at %d/s, want at least %.0f (unpaced: %d in 200 ms)", sent, d, rate, 0.8*want, unpaced)
			}
		})
	}
}

// TestForcedRefusedOrUnknown: a method name the generator does not know is
// an error before anything is sent, and so is an unknown MethodEnv.
func TestForcedRefusedOrUnknown(t *testing.T) {
	if _, err := trafficgen.ParseMethod("turbo"); err == nil || !strings.Contains(err.Error(), "want auto, live, broadcast or packet") {
		t.Fatalf("ParseMethod(turbo) = %v", err)
	}
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the traffic generator")
	defer g.Close()
	t.Setenv(trafficgen.MethodEnv, "turbo")
	if _, err := g.Run(context.Background(), trafficgen.Config{Count: 1}); err == nil || !strings.Contains(err.Error(), trafficgen.MethodEnv) {
		t.Fatalf("Run with %s=turbo = %v, want an error naming the variable", trafficgen.MethodEnv, err)
	}
}

// BenchmarkMethods reports each method's rate to an XDP_DROP receiver on
// one CPU, sender and receiver both on CPU 0, in runs of 2 s: frames per
// second the receiver dropped.
func BenchmarkMethods(b *testing.B) {
	g, err := trafficgen.New()
	testenv.Check(b, err, "loading the traffic generator")
	defer g.Close()
	for _, m := range methods() {
		b.Run(string(m), func(b *testing.B) {
			if _, err := g.Choose(m); err != nil {
				b.Skipf("this kernel refuses %s: %v", m, err)
			}
			pair := vethtest.Pair(b, 1)
			vethtest.AttachVerdict(b, pair, xdptest.Drop)
			var sent uint64
			var took time.Duration
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				start := time.Now()
				n, err := g.Run(ctx, trafficgen.Config{
					NS: pair.NS, Ifindex: pair.Peer.Index, Method: m,
					SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
					CPUs: []int{0},
				})
				took += time.Since(start)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				sent += n
			}
			if got := vethtest.EthtoolS(b, "", pair.Host.Name)["rx_queue_0_xdp_drops"]; got != sent {
				b.Fatalf("sent %d, the receiver dropped %d", sent, got)
			}
			b.ReportMetric(float64(sent)/took.Seconds(), "frames/s")
		})
	}
}

// methods are the methods the tests run: every one, or only the one
// MethodEnv names, as the kernel matrix's guests name packet (under the
// emulator the faster methods overrun veth's ring on some kernels).
func methods() []trafficgen.Method {
	if m, err := trafficgen.ParseMethod(os.Getenv(trafficgen.MethodEnv)); err == nil && m != "" {
		return []trafficgen.Method{m}
	}
	return trafficgen.Methods
}
