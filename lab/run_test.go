package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab/stat"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// upForTest brings up a lab of the test's own, beside any lab a user has
// up, and takes it down when the test ends.
func upForTest(t testing.TB, queues int) Lab {
	t.Helper()
	testenv.Privileged(t)
	lb := ForTest(vethns.UniqueID())
	if err := lb.Up(queues); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	return lb
}

// TestRunExact sends a known number of frames under every scenario, with
// the exporter's rxq program on the DUT, and checks that the DUT received
// exactly what the generator sent.
func TestRunExact(t *testing.T) {
	lb := upForTest(t, 2)
	const n = 200_000
	for _, sc := range Scenarios {
		t.Run(string(sc), func(t *testing.T) {
			res, err := lb.Run(context.Background(), RunConfig{Scenario: sc, Queues: 2, Count: n,
				Size: trafficgen.MinFrameSize, Attach: lb.AttachRxq})
			if err != nil {
				t.Fatal(err)
			}
			// The generator's counter is the truth about what was sent:
			// a signal that interrupts BPF_PROG_RUN makes it run a slice
			// again, so Sent may exceed the count asked for, never fall
			// short of it.
			if res.Sent < n || res.Received != res.Sent {
				t.Fatalf("sent %d (asked %d), DUT received %d", res.Sent, n, res.Received)
			}
			if res.Method.Method == "" || res.Method.Reason == "" {
				t.Fatalf("the result names no generator method: %+v", res.Method)
			}
		})
	}
}

// TestRunNamesMethod runs the drop scenario with every generator method
// forced in turn: a run with a method the kernel takes says it on its
// first line (and, for AF_PACKET, that its rates are the sender's) and
// counts exactly; one the kernel refuses fails before sending, with the
// kernel's answer and the methods that work.
func TestRunNamesMethod(t *testing.T) {
	lb := upForTest(t, 1)
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the traffic generator")
	defer g.Close()
	for _, m := range trafficgen.Methods {
		t.Run(string(m), func(t *testing.T) {
			_, refused := g.Choose(m)
			var progress strings.Builder
			res, err := lb.Run(context.Background(), RunConfig{Scenario: Drop, Queues: 1, Count: 20_000,
				Size: trafficgen.MinFrameSize, Attach: lb.AttachRxq, Method: m, Progress: &progress})
			if refused != nil {
				if err == nil || !strings.Contains(err.Error(), "methods that work here") || res.Sent != 0 {
					t.Fatalf("forced %s, which the kernel refuses (%v): run sent %d, %v", m, refused, res.Sent, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(progress.String(), "\n")
			if want := "generator: " + string(m) + ": asked for"; first != want {
				t.Errorf("first line %q, want %q", first, want)
			}
			if slow := strings.Contains(progress.String(), SlowWarning); slow != (m == trafficgen.Packet) {
				t.Errorf("%s: slow warning printed: %v\n%s", m, slow, progress.String())
			}
			if res.Sent != 20_000 || res.Received != res.Sent || res.Method.Method != m {
				t.Fatalf("sent %d, received %d, method %v", res.Sent, res.Received, res.Method)
			}
		})
	}
}

// TestRunRefusesWithoutProgram: with --no-attach and no exporter attached,
// the run stops with a hint instead of sending frames veth would drop.
func TestRunRefusesWithoutProgram(t *testing.T) {
	lb := upForTest(t, 1)
	_, err := lb.Run(context.Background(), RunConfig{Scenario: Drop, Queues: 1, Count: 10})
	if err == nil {
		t.Fatal("run without a DUT program succeeded")
	}
	t.Log(err)
}

// BenchmarkLabDropMax is `xdp-lab run --scenario drop --queues 2 --rate
// max`: the lab's peak rate on this machine, in Mpps, with exact counts.
func BenchmarkLabDropMax(b *testing.B) {
	lb := upForTest(b, 2)
	var mpps []float64
	for b.Loop() {
		res, err := lb.Run(context.Background(), RunConfig{Scenario: Drop, Queues: 2,
			Size: trafficgen.MinFrameSize, Duration: 3 * time.Second, Attach: lb.AttachRxq})
		if err != nil {
			b.Fatal(err)
		}
		if res.Received != res.Sent {
			b.Fatalf("sent %d, received %d", res.Sent, res.Received)
		}
		mpps = append(mpps, res.RxPPS()/1e6)
	}
	b.ReportMetric(stat.Median(mpps), "Mpps")
}
