package bpf

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"sort"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// xdpMd mirrors struct xdp_md, the context BPF_PROG_RUN takes for XDP.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// loIndex is the loopback device: BPF_PROG_RUN needs a registered device
// for ctx->ingress_ifindex, and lo always has RX queue 0.
func loIndex(t testing.TB) int {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	return lo.Index
}

// testFrame is a 60-byte Ethernet frame with distinct source and destination.
func testFrame() []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0xd1})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 0x51})
	f[12], f[13] = 0x08, 0x00
	return f
}

func loadRxq(t testing.TB, cfg RxqConfig) *RxqObjects {
	t.Helper()
	testenv.Privileged(t)
	objs, err := LoadRxqConfigured(cfg)
	testenv.Check(t, err, "loading rxq")
	t.Cleanup(func() { objs.Close() })
	return objs
}

func sumRec(t testing.TB, m *ebpf.Map, key uint32) RxqRxqRec {
	t.Helper()
	var perCPU []RxqRxqRec
	if err := m.Lookup(key, &perCPU); err != nil {
		t.Fatal(err)
	}
	var s RxqRxqRec
	for _, r := range perCPU {
		s.Packets += r.Packets
		s.Bytes += r.Bytes
	}
	return s
}

func sumU64(t testing.TB, m *ebpf.Map, key uint32) uint64 {
	t.Helper()
	var perCPU []uint64
	if err := m.Lookup(key, &perCPU); err != nil {
		t.Fatal(err)
	}
	var s uint64
	for _, v := range perCPU {
		s += v
	}
	return s
}

// TestRxqProgRun runs the program on a test frame under every action and
// option and checks the verdict, the counts and the frame it returns.
func TestRxqProgRun(t *testing.T) {
	for _, tc := range []struct {
		action XDPAction
		read   bool
	}{
		{XDPPass, false}, {XDPPass, true}, {XDPDrop, false}, {XDPDrop, true},
		{XDPTx, false}, {XDPTx, true}, {XDPRedirect, false},
	} {
		t.Run(fmt.Sprintf("action=%d/read=%v", tc.action, tc.read), func(t *testing.T) {
			lo := loIndex(t)
			objs := loadRxq(t, RxqConfig{Ifindex: lo, Action: tc.action, Read: tc.read, Queues: 4})
			if tc.action == XDPRedirect {
				if err := objs.RxqRedirect.Put(uint32(0), uint32(lo)); err != nil {
					t.Fatal(err)
				}
			}
			in := testFrame()
			out := make([]byte, len(in))
			// Non-live test runs reuse one buffer, so an odd count
			// leaves a swapped frame behind.
			const n = 999
			ret, err := objs.XdpRxq.Run(&ebpf.RunOptions{
				Data: in, DataOut: out, Repeat: n,
				Context: xdpMd{DataEnd: uint32(len(in)), IngressIfindex: uint32(lo)},
			})
			if err != nil {
				t.Fatal(err)
			}
			if XDPAction(ret) != tc.action {
				t.Errorf("verdict %d, want %d", ret, tc.action)
			}
			if got := sumRec(t, objs.RxqStats, 0); got.Packets != n || got.Bytes != n*uint64(len(in)) {
				t.Errorf("queue 0 counted %+v, want %d packets of %d bytes", got, n, len(in))
			}
			if got := sumRec(t, objs.RxqStats, 1); got.Packets != 0 {
				t.Errorf("queue 1 counted %d packets, want 0", got.Packets)
			}
			if got := sumU64(t, objs.RxqIssues, RxqIssueIfindex) + sumU64(t, objs.RxqIssues, RxqIssueQueue); got != 0 {
				t.Errorf("%d issues, want 0", got)
			}
			want := testFrame()
			if tc.action == XDPTx {
				copy(want[0:6], in[6:12])
				copy(want[6:12], in[0:6])
			}
			if !bytes.Equal(out, want) {
				t.Errorf("frame out\n% x\nwant\n% x", out, want)
			}
		})
	}
}

// TestRxqIfindexIssue runs the program with an ingress device other than
// the one it was loaded for: every packet is an issue, none is counted per
// queue, and the verdict is still the configured one.
func TestRxqIfindexIssue(t *testing.T) {
	lo := loIndex(t)
	objs := loadRxq(t, RxqConfig{Ifindex: lo + 1000, Action: XDPPass})
	in := testFrame()
	const n = 500
	ret, err := objs.XdpRxq.Run(&ebpf.RunOptions{
		Data: in, Repeat: n,
		Context: xdpMd{DataEnd: uint32(len(in)), IngressIfindex: uint32(lo)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if XDPAction(ret) != XDPPass {
		t.Errorf("verdict %d, want XDP_PASS", ret)
	}
	if got := sumU64(t, objs.RxqIssues, RxqIssueIfindex); got != n {
		t.Errorf("ifindex issues %d, want %d", got, n)
	}
	if got := sumRec(t, objs.RxqStats, 0); got.Packets != 0 {
		t.Errorf("queue 0 counted %d packets, want 0", got.Packets)
	}
}

// bareDrop is the baseline: an XDP program that only returns XDP_DROP.
func bareDrop(t testing.TB) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(XDPDrop)), asm.Return()},
	})
	testenv.Check(t, err, "loading a bare XDP_DROP program")
	t.Cleanup(func() { p.Close() })
	return p
}

// counterDrop is the floor of any counting program: one per-CPU array
// lookup with a constant key, one increment, XDP_DROP; what xdp-bench's
// drop program does per packet.
func counterDrop(t testing.TB) *ebpf.Program {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	testenv.Check(t, err, "creating a per-CPU array")
	t.Cleanup(func() { m.Close() })
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, int32(XDPDrop)).WithSymbol("out"),
			asm.Return(),
		},
	})
	testenv.Check(t, err, "loading a counting XDP_DROP program")
	t.Cleanup(func() { p.Close() })
	return p
}

// benchRepeat is the repeat count of one BPF_PROG_RUN: large enough that
// the syscall's own cost vanishes, small enough (~40 ms) that many
// alternating pairs fit in a run and their median shrugs off the
// disturbances of a shared machine.
const benchRepeat = 1_000_000

// nsPerRun runs prog benchRepeat times in one BPF_PROG_RUN and returns the
// time per run by the calling thread's CPU clock: the whole repeat loop
// runs in that thread's syscall, and unlike the wall clock the thread clock
// does not count the time other tasks on a busy machine held the CPU.
func nsPerRun(b *testing.B, prog *ebpf.Program, ctx xdpMd, frame []byte) float64 {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadNow(b)
	if _, err := prog.Run(&ebpf.RunOptions{Data: frame, Repeat: benchRepeat, Context: ctx}); err != nil {
		b.Fatal(err)
	}
	return float64(threadNow(b)-start) / benchRepeat
}

func threadNow(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkRxqProgRun measures what the rxq program adds per packet over a
// bare XDP_DROP: each iteration runs both, one after the other, benchRepeat
// times each in one BPF_PROG_RUN, timed over the whole loop (the per-run
// overhead of BPF_PROG_RUN itself, ~33 ns, is in both and cancels in the
// difference). Reported: medians over iterations of ns per packet for
// each, of their difference and the ratio of the medians. "bare" compares
// the bare program with itself (the noise floor of the method) and
// "counter" is a constant-key per-CPU counter (the floor of any counting
// program). Run with -benchtime=101x.
func BenchmarkRxqProgRun(b *testing.B) {
	lo := loIndex(b)
	ctx := xdpMd{DataEnd: 60, IngressIfindex: uint32(lo)}
	frame := testFrame()
	bare := bareDrop(b)
	for _, v := range []struct {
		name   string
		action XDPAction
		read   bool
	}{
		{"bare", 0, false},
		{"counter", 0, false},
		{"pass", XDPPass, false}, {"drop", XDPDrop, false},
		{"pass-read", XDPPass, true}, {"drop-read", XDPDrop, true},
	} {
		b.Run(v.name, func(b *testing.B) {
			var prog *ebpf.Program
			switch v.name {
			case "bare":
				prog = bare
			case "counter":
				prog = counterDrop(b)
			default:
				prog = loadRxq(b, RxqConfig{Ifindex: lo, Action: v.action, Read: v.read}).XdpRxq
			}
			var base, rxq, diff []float64
			for i := 0; i < b.N; i++ {
				x := nsPerRun(b, bare, ctx, frame)
				y := nsPerRun(b, prog, ctx, frame)
				base, rxq, diff = append(base, x), append(rxq, y), append(diff, y-x)
			}
			b.ReportMetric(median(base), "bare-ns/pkt")
			b.ReportMetric(median(rxq), "prog-ns/pkt")
			b.ReportMetric(median(diff), "extra-ns/pkt")
			b.ReportMetric(median(rxq)/median(base), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}
