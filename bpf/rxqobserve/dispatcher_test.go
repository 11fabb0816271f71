package rxqobserve_test

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/rxqobserve"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xdpdispatch"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

func xdpLoader(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("xdp-loader", args...).CombinedOutput(); err != nil {
		t.Fatalf("xdp-loader %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// readDispatcher reads the dispatcher on dev, nil when libxdp put the
// program there alone. It holds no reference to any program after it
// returns: a test that did would keep a removed program alive.
func readDispatcher(t *testing.T, dev string, ifindex int) *xdpdispatch.Dispatcher {
	t.Helper()
	p := openProgram(t, ebpf.ProgramID(vethtest.AttachedXDP(t, dev)))
	defer p.Close()
	d, err := xdpdispatch.Read(p, uint32(ifindex), "/sys/fs/bpf")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func openProgram(t *testing.T, id ebpf.ProgramID) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		t.Fatalf("opening program %d: %v", id, err)
	}
	return p
}

// observeProgram observes program id, holding no reference to it but the
// observer's link.
func observeProgram(t *testing.T, id ebpf.ProgramID, ifindex int) *rxqobserve.Observer {
	t.Helper()
	p := openProgram(t, id)
	defer p.Close()
	return observeOrUnsupported(t, p, ifindex, 2)
}

// TestObserveComponents is what the kernel allows around libxdp's
// dispatcher, measured with Debian's xdp-loader in the kernel matrix:
// one program loaded, its dispatcher and its component observed; a
// second added, then the first removed, with the observers attached. The
// observers never make xdp-loader fail; a component's observer attaches
// on every kernel with trampolines and counts that component's verdicts
// exactly (the second sees only what the first passed on); the observer
// of a removed component is the last holder of its program. Whether the
// kernel puts a trampoline on the dispatcher itself is logged: Debian's
// 5.10, 6.1 and 6.12 refuse it (EBUSY) on a dispatcher of one component
// and allow it on one of two (docs/collectors/rxq.md).
func TestObserveComponents(t *testing.T) {
	if _, err := exec.LookPath("xdp-loader"); err != nil {
		t.Fatalf("xdp-loader not installed (xdp-tools; make deps): %v", err)
	}
	pair := vethtest.Pair(t, 2)
	dev := pair.Host.Name
	t.Cleanup(func() { _ = exec.Command("xdp-loader", "unload", "--all", dev).Run() })
	xdpLoader(t, "load", "-m", "native", dev, sizedObject)
	d := readDispatcher(t, dev, pair.Host.Index)
	if d == nil {
		t.Logf("libxdp loaded the program alone: this kernel does not run its dispatcher")
		return
	}
	dispatcherObservable := func(step string, id ebpf.ProgramID) {
		p := openProgram(t, id)
		defer p.Close()
		o, err := rxqobserve.New(p, pair.Host.Index, 2)
		if err != nil {
			t.Logf("%s: the dispatcher cannot be observed (%s): %v", step, rxqobserve.Unobservable(err), err)
			return
		}
		t.Logf("%s: the dispatcher can be observed", step)
		o.Close()
	}
	dispatcherObservable("one component", d.Prog)
	first := observeProgram(t, d.Components[0].Prog, pair.Host.Index)
	if first == nil {
		return
	}
	t.Run("counted", func(t *testing.T) {
		xdpLoader(t, "load", "-m", "native", dev, sizedObject)
		d := readDispatcher(t, dev, pair.Host.Index)
		if len(d.Components) != 2 || d.Components[0].Prog != first.Target() {
			t.Fatalf("after adding a program: %+v, want the observed one first and another", d)
		}
		dispatcherObservable("two components", d.Prog)
		second := observeProgram(t, d.Components[1].Prog, pair.Host.Index)
		if second == nil {
			t.Fatal("the second component cannot be observed where the first could")
		}
		const n = 1000
		vethtest.SendExactly(t, pair, n)
		vethtest.SendSized(t, pair, n, int(xdptest.SizedSizedSIZED_DROP_FROM))
		var wantFirst, wantSecond []rxqobserve.Count
		for q := range 2 {
			pass := rxqobserve.Count{Queue: q, CPU: q, Verdict: rxqobserve.ObserverVerdictVERDICT_PASS, Packets: n / 2, Bytes: n / 2 * trafficgen.MinFrameSize}
			wantFirst = append(wantFirst,
				rxqobserve.Count{Queue: q, CPU: q, Verdict: rxqobserve.ObserverVerdictVERDICT_DROP, Packets: n / 2, Bytes: n / 2 * uint64(xdptest.SizedSizedSIZED_DROP_FROM)}, pass)
			wantSecond = append(wantSecond, pass)
		}
		if got := read(t, first); !slices.Equal(got, wantFirst) {
			t.Errorf("first component:\n got %+v\nwant %+v", got, wantFirst)
		}
		if got := read(t, second); !slices.Equal(got, wantSecond) {
			t.Errorf("second component (what the first passed on):\n got %+v\nwant %+v", got, wantSecond)
		}

		gone := first.Target()
		xdpLoader(t, "unload", "--id", strconv.Itoa(int(gone)), dev)
		d = readDispatcher(t, dev, pair.Host.Index)
		if len(d.Components) != 1 || d.Components[0].Prog != second.Target() {
			t.Fatalf("after removing the first: %+v, want the second alone", d)
		}
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		waitGone(t, gone)
	})
}

// waitGone waits until program id is freed: after the last reference
// goes, the kernel frees it after an RCU grace period.
func waitGone(t *testing.T, id ebpf.ProgramID) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, err := ebpf.NewProgramFromID(id)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err == nil {
			p.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d still exists 5 s after its removal and its observer's close", id)
		}
	}
}
