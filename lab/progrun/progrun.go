// Package progrun times XDP programs with BPF_PROG_RUN for the benchmarks
// that compare what programs cost per packet.
package progrun

import (
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// XDPMd mirrors struct xdp_md, the context BPF_PROG_RUN takes for XDP.
type XDPMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// Repeat is the repeat count of one BPF_PROG_RUN: large enough that
// the syscall's own cost vanishes, small enough (~40 ms) that many
// alternating pairs fit in a run and their median shrugs off the
// disturbances of a shared machine.
const Repeat = 1_000_000

// NsPerRun runs prog Repeat times in one BPF_PROG_RUN, with ctx as its
// context (an XDPMd, or nil for the kernel's default: before 5.15 XDP
// takes none), and returns the time per run by the calling thread's CPU
// clock: the whole repeat loop runs in
// that thread's syscall, and unlike the wall clock the thread clock does
// not count the time other tasks on a busy machine held the CPU.
func NsPerRun(b *testing.B, prog *ebpf.Program, ctx any, frame []byte) float64 {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadNow(b)
	if _, err := prog.Run(&ebpf.RunOptions{Data: frame, Repeat: Repeat, Context: ctx}); err != nil {
		b.Fatal(err)
	}
	return float64(threadNow(b)-start) / Repeat
}

func threadNow(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}
