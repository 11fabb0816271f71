package rxq

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab/progrun"
	"github.com/xdp-exporter/xdp_exporter/lab/stat"
)

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

func loadRxq(t testing.TB, cfg Config) *Program {
	t.Helper()
	testenv.Privileged(t)
	r, err := Load(cfg)
	testenv.Check(t, err, "loading rxq")
	t.Cleanup(func() { r.Close() })
	return r
}

func sum(recs []RxqRxqRec) RxqRxqRec {
	var s RxqRxqRec
	for _, r := range recs {
		s.Packets += r.Packets
		s.Bytes += r.Bytes
	}
	return s
}

// onCPU runs f on a thread bound to cpu: BPF_PROG_RUN runs the program
// on the calling thread's CPU.
func onCPU(t *testing.T, cpu int, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Fatalf("binding to CPU %d: %v", cpu, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	f()
}

// needXDPContextIn ends a test that gives BPF_PROG_RUN an xdp_md (ingress
// ifindex, RX queue) on kernels before 5.12, which refuse one ("bpf:
// Support input xdp_md context in BPF_PROG_TEST_RUN"). There the program's
// counting is checked with real frames instead (collector.TestRxqActions,
// kernels.TestExactCounts).
func needXDPContextIn(t *testing.T) {
	t.Helper()
	if testenv.KernelBefore(t, 5, 12) {
		t.Skip("BPF_PROG_RUN takes an xdp_md context from Linux 5.12")
	}
}

// TestRxqProgRun runs the program on a test frame under every action and
// option, on each CPU in turn, and checks the verdict, the counts per
// queue and CPU and the frame it returns.
func TestRxqProgRun(t *testing.T) {
	needXDPContextIn(t)
	for _, tc := range []struct {
		action XDPAction
		read   bool
	}{
		{XDPPass, false}, {XDPPass, true}, {XDPDrop, false}, {XDPDrop, true},
		{XDPTx, false}, {XDPTx, true}, {XDPRedirect, false},
	} {
		t.Run(fmt.Sprintf("action=%d/read=%v", tc.action, tc.read), func(t *testing.T) {
			lo := loIndex(t)
			r := loadRxq(t, Config{Action: tc.action, Read: tc.read, Queues: 4})
			if tc.action == XDPRedirect {
				if err := r.Redirect.Put(uint32(0), uint32(lo)); err != nil {
					t.Fatal(err)
				}
			}
			cpus := runtime.NumCPU()
			const n = 999
			in := testFrame()
			for cpu := range cpus {
				out := make([]byte, len(in))
				onCPU(t, cpu, func() {
					// A count per CPU that tells the CPUs apart.
					ret := runEach(t, r.Prog, n+2*cpu, &ebpf.RunOptions{
						Data: in, DataOut: out,
						Context: progrun.XDPMd{DataEnd: uint32(len(in)), IngressIfindex: uint32(lo)},
					})
					if XDPAction(ret) != tc.action {
						t.Errorf("verdict %d, want %d", ret, tc.action)
					}
				})
				want := testFrame()
				if tc.action == XDPTx {
					copy(want[0:6], in[6:12])
					copy(want[6:12], in[0:6])
				}
				if !bytes.Equal(out, want) {
					t.Errorf("frame out\n% x\nwant\n% x", out, want)
				}
			}
			c := r.Read()
			if len(c.Queue) != 4 {
				t.Fatalf("%d queues read, want 4", len(c.Queue))
			}
			for cpu := range cpus {
				want := uint64(n + 2*cpu)
				if got := c.Queue[0][cpu]; got.Packets != want || got.Bytes != want*uint64(len(in)) {
					t.Errorf("queue 0 CPU %d counted %+v, want %d packets of %d bytes", cpu, got, want, len(in))
				}
			}
			for q := 1; q < 4; q++ {
				if got := sum(c.Queue[q]); got.Packets != 0 {
					t.Errorf("queue %d counted %d packets, want 0", q, got.Packets)
				}
			}
			if got := sum(c.QueueOutOfRange).Packets + sum(c.IfindexMismatch).Packets; got != 0 {
				t.Errorf("%d issues, want 0", got)
			}
		})
	}
}

// TestRxqIfindexIssue runs the program with an ingress device other than
// the one it was loaded for. With the check, every packet is an issue, none
// is counted per queue, and the verdict is still the configured one;
// without it (the default: the collector attaches each program to its
// device only) the packets count on their queue.
func TestRxqIfindexIssue(t *testing.T) {
	needXDPContextIn(t)
	for _, check := range []bool{true, false} {
		t.Run(fmt.Sprintf("check=%v", check), func(t *testing.T) {
			lo := loIndex(t)
			r := loadRxq(t, Config{CheckIfindex: check, Ifindex: lo + 1000, Action: XDPPass})
			in := testFrame()
			const n = 500
			ret := runEach(t, r.Prog, n, &ebpf.RunOptions{
				Data:    in,
				Context: progrun.XDPMd{DataEnd: uint32(len(in)), IngressIfindex: uint32(lo)},
			})
			if XDPAction(ret) != XDPPass {
				t.Errorf("verdict %d, want XDP_PASS", ret)
			}
			c := r.Read()
			wantIssues, wantQueue := uint64(n), uint64(0)
			if !check {
				wantIssues, wantQueue = 0, n
			}
			if got := sum(c.IfindexMismatch); got.Packets != wantIssues || got.Bytes != wantIssues*uint64(len(in)) {
				t.Errorf("ifindex issues %+v, want %d packets", got, wantIssues)
			}
			if got := sum(c.Queue[0]).Packets; got != wantQueue {
				t.Errorf("queue 0 counted %d packets, want %d", got, wantQueue)
			}
		})
	}
}

// runEach runs prog n times, one BPF_PROG_RUN each, and returns the last
// verdict. One run of repeat n is not n runs: a signal (the Go runtime's
// preemption) interrupts it with EINTR after some runs, which the kernel
// has counted, and cilium/ebpf starts it over from the first.
func runEach(t *testing.T, prog *ebpf.Program, n int, opts *ebpf.RunOptions) uint32 {
	t.Helper()
	var ret uint32
	for range n {
		var err error
		if ret, err = prog.Run(opts); err != nil {
			t.Fatal(err)
		}
	}
	return ret
}

// bareDrop is the baseline: an XDP program that only returns XDP_DROP.
func bareDrop(t testing.TB) *ebpf.Program {
	t.Helper()
	p, err := xdptest.Verdict("rxq_bare", xdptest.Drop)
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
		Instructions: slices.Concat(
			asm.Instructions{asm.StoreImm(asm.RFP, -4, 0, asm.Word)},
			countKeyOnStack(m),
			asm.Instructions{asm.Mov.Imm(asm.R0, int32(XDPDrop)).WithSymbol("out"), asm.Return()},
		),
	})
	testenv.Check(t, err, "loading a counting XDP_DROP program")
	t.Cleanup(func() { p.Close() })
	return p
}

// countKeyOnStack looks up in m the 4-byte key at fp-4 and adds one to the
// value's first u64, jumping to "out" when there is none; R0 keeps the
// value.
func countKeyOnStack(m *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
	}
}

// perCPUQueueDrop is the layout the rxq program had before its global
// array, kept here to compare against: a per-CPU array keyed by
// ctx->rx_queue_index (one inlined lookup through the key on the stack),
// two increments, XDP_DROP; with checkIfindex, first the comparison of
// ctx->ingress_ifindex with ifindex that skips the counting on a mismatch.
func perCPUQueueDrop(t testing.TB, checkIfindex bool, ifindex int) *ebpf.Program {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 16, MaxEntries: 2})
	testenv.Check(t, err, "creating a per-CPU array")
	t.Cleanup(func() { m.Close() })
	insns := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	if checkIfindex {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R6, 12, asm.Word), // ingress_ifindex
			asm.JNE.Imm(asm.R1, int32(ifindex), "out"),
		)
	}
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R6, 16, asm.Word), // rx_queue_index
		asm.StoreMem(asm.RFP, -4, asm.R1, asm.Word),
	)
	insns = append(insns, countKeyOnStack(m)...)
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R6, 0, asm.Word), // data
		asm.LoadMem(asm.R2, asm.R6, 4, asm.Word), // data_end
		asm.Sub.Reg(asm.R2, asm.R1),
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.StoreMem(asm.R0, 8, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, int32(XDPDrop)).WithSymbol("out"),
		asm.Return(),
	)
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
	testenv.Check(t, err, "loading the per-CPU queue counter")
	t.Cleanup(func() { p.Close() })
	return p
}

// xdpBenchDrop loads xdp-bench's drop programs (no-touch and read-data,
// as `xdp-bench drop [-p read-data]` runs them) from the built xdp-tools
// tree named by XDP_TOOLS_DIR, so they run in the same rotation as ours;
// none without it.
func xdpBenchDrop(b *testing.B) []struct {
	name string
	prog *ebpf.Program
} {
	dir := os.Getenv("XDP_TOOLS_DIR")
	if dir == "" {
		return nil
	}
	spec, err := ebpf.LoadCollectionSpec(filepath.Join(dir, "xdp-bench", "xdp_basic.bpf.o"))
	if err != nil {
		b.Fatal(err)
	}
	if err := spec.Variables["action"].Set(uint32(XDPDrop)); err != nil {
		b.Fatal(err)
	}
	// xdp-tools sizes its counter maps at load time (by CPUs, queues and
	// actions); 4096 covers them all on this machine.
	for _, m := range spec.Maps {
		if m.MaxEntries == 0 {
			m.MaxEntries = 4096
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(coll.Close)
	return []struct {
		name string
		prog *ebpf.Program
	}{
		{"xdp-bench", coll.Programs["xdp_basic_prog"]},
		{"xdp-bench-read", coll.Programs["xdp_read_data_prog"]},
	}
}

// BenchmarkRxqProgRun measures what the rxq program adds per packet over a
// bare XDP_DROP: each iteration runs the bare program and then every
// variant, progrun.Repeat times each in one BPF_PROG_RUN, timed over the
// whole loop (the per-run overhead of BPF_PROG_RUN itself, ~27-35 ns, is
// in every run and cancels in the difference). The variants run in a
// rotating order, each against the bare run of its iteration. Reported per
// variant: the median over iterations of the difference and the ratio of
// the medians, and in the logged table also the median ns per packet and
// "min-extra", the difference of the fastest runs, which a busy machine
// can only slow down. "bare" is the bare
// program against itself (the noise floor of the method), "counter" a
// constant-key per-CPU counter (the floor of any counting program), "old"
// and "old-noifindex" the previous layout (per-CPU array keyed by queue)
// with and without the ifindex check; "check-ifindex" is drop with
// --collector.rxq.check-ifindex; "xdp-bench" and "xdp-bench-read" are
// xdp-tools' drop programs, when XDP_TOOLS_DIR names a built tree. Run
// with -benchtime=101x.
func BenchmarkRxqProgRun(b *testing.B) {
	lo := loIndex(b)
	ctx := progrun.XDPMd{DataEnd: 60, IngressIfindex: uint32(lo)}
	frame := testFrame()
	bare := bareDrop(b)
	rxq := func(cfg Config) *ebpf.Program {
		cfg.Ifindex = lo
		return loadRxq(b, cfg).Prog
	}
	variants := []struct {
		name string
		prog *ebpf.Program
	}{
		{"bare", bare},
		{"counter", counterDrop(b)},
		{"old", perCPUQueueDrop(b, true, lo)},
		{"old-noifindex", perCPUQueueDrop(b, false, lo)},
		{"pass", rxq(Config{Action: XDPPass})},
		{"drop", rxq(Config{Action: XDPDrop})},
		{"pass-read", rxq(Config{Action: XDPPass, Read: true})},
		{"drop-read", rxq(Config{Action: XDPDrop, Read: true})},
		{"check-ifindex", rxq(Config{Action: XDPDrop, CheckIfindex: true})},
	}
	for _, p := range xdpBenchDrop(b) {
		variants = append(variants, struct {
			name string
			prog *ebpf.Program
		}{p.name, p.prog})
	}
	var base []float64
	runs := make([][]float64, len(variants))
	diffs := make([][]float64, len(variants))
	for i := 0; i < b.N; i++ {
		x := progrun.NsPerRun(b, bare, ctx, frame)
		base = append(base, x)
		for k := range variants {
			v := (k + i) % len(variants)
			y := progrun.NsPerRun(b, variants[v].prog, ctx, frame)
			runs[v], diffs[v] = append(runs[v], y), append(diffs[v], y-x)
		}
	}
	// One line of metrics per run, so that one benchmark loop serves every
	// variant (sub-benchmarks would each time a separate loop), and a table.
	table := fmt.Sprintf("bare drop: %.2f ns/packet (median)\n%-14s %8s %8s %6s %10s\n",
		stat.Median(base), "variant", "ns/pkt", "extra", "ratio", "min-extra")
	for v, variant := range variants {
		b.ReportMetric(stat.Median(diffs[v]), variant.name+"-extra-ns/pkt")
		b.ReportMetric(stat.Median(runs[v])/stat.Median(base), variant.name+"-ratio")
		table += fmt.Sprintf("%-14s %8.2f %8.2f %6.3f %10.2f\n", variant.name, stat.Median(runs[v]),
			stat.Median(diffs[v]), stat.Median(runs[v])/stat.Median(base), slices.Min(runs[v])-slices.Min(base))
	}
	b.ReportMetric(stat.Median(base), "bare-ns/pkt")
	b.ReportMetric(0, "ns/op")
	b.Log("\n" + table)
}
