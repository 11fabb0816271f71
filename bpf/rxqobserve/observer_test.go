package rxqobserve_test

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	bpfrxq "github.com/xdp-exporter/xdp_exporter/bpf/rxq"
	"github.com/xdp-exporter/xdp_exporter/bpf/rxqobserve"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xdpdispatch"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/progrun"
	"github.com/xdp-exporter/xdp_exporter/lab/stat"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// sizedObject is the user's program the tests attach with iproute2.
const sizedObject = "../xdptest/sized_bpfel.o"

// observeOrUnsupported attaches an observer as the exporter does. Where
// the running kernel refuses tracing programs (this project's development
// VM) it checks that the refusal is classified as the kernel lacking the
// feature, and returns nil: the test then has nothing more to check on
// this kernel. The kernel matrix requires the tests' "counted" subtests
// to pass on the kernels that have trampolines. A test may accept more
// reasons for its target (also).
func observeOrUnsupported(t *testing.T, target *ebpf.Program, ifindex, queues int, also ...rxqobserve.Reason) *rxqobserve.Observer {
	t.Helper()
	o, err := rxqobserve.New(target, ifindex, queues)
	if err != nil {
		r := rxqobserve.Unobservable(err)
		if !slices.Contains(append(also, rxqobserve.ReasonNotPermitted, rxqobserve.ReasonNotSupported), r) {
			t.Fatalf("observing: %v (reason %s)", err, r)
		}
		t.Logf("this kernel cannot observe this XDP program (%s): %v", r, err)
		return nil
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Errorf("closing the observer: %v", err)
		}
	})
	return o
}

func targetByID(t *testing.T, id uint32) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		t.Fatalf("opening XDP program %d: %v", id, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func read(t *testing.T, o *rxqobserve.Observer) []rxqobserve.Count {
	t.Helper()
	got, err := o.Read()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b rxqobserve.Count) int {
		if a.Queue != b.Queue {
			return a.Queue - b.Queue
		}
		if a.CPU != b.CPU {
			return a.CPU - b.CPU
		}
		return int(a.Verdict) - int(b.Verdict)
	})
	return got
}

// TestObserveCounts attaches the sized program with iproute2, as a user
// would, to a two-queue veth and sends frames of three sizes from two
// CPUs: the observer counts each frame once, by the queue and CPU that ran
// it and by the verdict the program returned, an invalid one included.
func TestObserveCounts(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	id := vethtest.AttachWithIP(t, pair.Host.Name, sizedObject, "xdp")
	o := observeOrUnsupported(t, targetByID(t, id), pair.Host.Index, 2)
	if o == nil {
		return
	}
	t.Run("counted", func(t *testing.T) {
		if o.Target() != ebpf.ProgramID(id) {
			t.Errorf("observer's target %d, want %d", o.Target(), id)
		}
		sends := []struct {
			n       uint64
			size    int
			verdict rxqobserve.ObserverVerdict
		}{
			{1000, trafficgen.MinFrameSize, rxqobserve.ObserverVerdictVERDICT_PASS},
			{500, int(xdptest.SizedSizedSIZED_DROP_FROM) + 28, rxqobserve.ObserverVerdictVERDICT_DROP},
			{100, int(xdptest.SizedSizedSIZED_INVALID_FROM) + 20, rxqobserve.ObserverVerdictVERDICT_UNKNOWN},
		}
		var want []rxqobserve.Count
		// veth runs queue q on CPU q when CPU q sends (see vethtest).
		for q := range 2 {
			for _, s := range sends {
				n := s.n / 2
				want = append(want, rxqobserve.Count{Queue: q, CPU: q, Verdict: s.verdict, Packets: n, Bytes: n * uint64(s.size)})
			}
		}
		slices.SortFunc(want, func(a, b rxqobserve.Count) int { return (a.Queue-b.Queue)*100 + int(a.Verdict) - int(b.Verdict) })
		for _, s := range sends {
			vethtest.SendSized(t, pair, s.n, s.size)
		}
		if got := read(t, o); !slices.Equal(got, want) {
			t.Errorf("counts:\n got %+v\nwant %+v", got, want)
		}
	})
}

// TestObserveTailCall observes a program that tail-calls into one that
// drops: the tail call returns through the entry program's trampoline, so
// its observer sees the callee's verdict, and the callee's own observer
// sees nothing.
func TestObserveTailCall(t *testing.T) {
	const n = 1000
	pair := vethtest.Pair(t, 2)
	var objs xdptest.TailcallObjects
	if err := xdptest.LoadTailcallObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	if err := objs.Jump.Put(uint32(0), objs.XdpCalleeDrop); err != nil {
		t.Fatal(err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: objs.XdpEntry, Interface: pair.Host.Index})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	entry := observeOrUnsupported(t, objs.XdpEntry, pair.Host.Index, 2)
	if entry == nil {
		return
	}
	t.Run("counted", func(t *testing.T) {
		callee := observeOrUnsupported(t, objs.XdpCalleeDrop, pair.Host.Index, 2)
		vethtest.SendExactly(t, pair, n)
		var drops uint64
		for _, c := range read(t, entry) {
			if c.Verdict != rxqobserve.ObserverVerdictVERDICT_DROP {
				t.Errorf("entry program counted %+v; the chain only drops", c)
			}
			drops += c.Packets
		}
		if drops != n {
			t.Errorf("entry program's observer counted %d drops, want %d", drops, n)
		}
		if got := read(t, callee); len(got) != 0 {
			t.Errorf("the tail-called program's observer counted %+v; tail calls skip its trampoline", got)
		}
	})
}

// TestObserveNoBTF: a program loaded without BTF (raw instructions, as
// some loaders do) cannot be observed, and New says so on every kernel.
func TestObserveNoBTF(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	l, err := vethns.AttachVerdictTo(pair.Host.Index, "xdpt_verdict", xdptest.Pass)
	testenv.Check(t, err, "attaching a program without BTF")
	defer l.Close()
	id := vethtest.AttachedXDP(t, pair.Host.Name)
	o, err := rxqobserve.New(targetByID(t, id), pair.Host.Index, 1)
	if err == nil {
		o.Close()
		t.Fatal("observed a program without BTF")
	}
	if !errors.Is(err, rxqobserve.ErrNoBTF) || rxqobserve.Unobservable(err) != rxqobserve.ReasonNoBTF {
		t.Errorf("New: %v (reason %s), want ErrNoBTF", err, rxqobserve.Unobservable(err))
	}
}

// dropInstance loads its own instance of a BTF-carrying program that only
// returns XDP_DROP (the tail call fixture's callee).
func dropInstance(b *testing.B) *ebpf.Program {
	b.Helper()
	var objs xdptest.TailcallObjects
	testenv.Check(b, xdptest.LoadTailcallObjects(&objs, nil), "loading an XDP_DROP program")
	b.Cleanup(func() { objs.Close() })
	return objs.XdpCalleeDrop
}

// BenchmarkObserveCost measures what observing costs per packet: BPF_PROG_RUN
// repeats of an XDP_DROP program, bare ("base"), the same program in a
// second instance ("control", the noise floor: its ratio must be within
// 1% of 1), a third instance with an observer attached ("observed": the
// trampoline and the fexit program), and the rxq collector's own drop
// program ("rxq-drop": counting inside the program, attach mode). Every
// iteration runs each variant once, progrun.Repeat times, in an order
// rotated by one each iteration. Reported: median ns per packet and the
// ratio of medians to base, and the programs' instruction counts. Where
// xdp-loader puts libxdp's dispatcher on a device, two more: a dispatcher
// of one component ("dispatcher") and a second one whose component is
// observed ("component"), the observer of a program inside the
// dispatcher next to the direct one. The
// trampoline needs a kernel with fexit on XDP programs: run it in the
// kernel matrix's guests, whose emulated CPU makes the figures
// indicative only. Run with -benchtime=31x.
func BenchmarkObserveCost(b *testing.B) {
	testenv.Privileged(b)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		b.Fatal(err)
	}
	// No context: BPF_PROG_RUN runs XDP on lo's RX queue 0 on every
	// kernel (5.10 takes no xdp_md context).
	frame := make([]byte, 60)
	observed := dropInstance(b)
	o, err := rxqobserve.New(observed, lo.Index, 1)
	if err != nil {
		testenv.Unavailable(b, "this kernel cannot observe XDP programs (%s): %v", rxqobserve.Unobservable(err), err)
		return
	}
	defer o.Close()
	rxq, err := bpfrxq.Load(bpfrxq.Config{Action: bpfrxq.XDPDrop, Ifindex: lo.Index, Queues: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer rxq.Close()
	base := dropInstance(b)
	variants := []struct {
		name string
		prog *ebpf.Program
	}{{"base", base}, {"control", dropInstance(b)}, {"observed", observed}, {"rxq-drop", rxq.Prog}}
	observers := []*rxqobserve.Observer{o}
	if plain, observedComp, comp := dispatchers(b, lo.Index); plain != nil {
		variants = append(variants, struct {
			name string
			prog *ebpf.Program
		}{"dispatcher", plain}, struct {
			name string
			prog *ebpf.Program
		}{"component", observedComp})
		observers = append(observers, comp)
	}
	runs := make([][]float64, len(variants))
	for i := 0; i < b.N; i++ {
		for k := range variants {
			v := (k + i) % len(variants)
			runs[v] = append(runs[v], progrun.NsPerRun(b, variants[v].prog, nil, frame))
		}
	}
	checkCountedRuns(b, observers, uint64(b.N)*progrun.Repeat)
	table := fmt.Sprintf("%-10s %8s %6s %8s\n", "variant", "ns/pkt", "ratio", "insns")
	for v, variant := range variants {
		info, err := variant.prog.Info()
		if err != nil {
			b.Fatal(err)
		}
		insns, err := info.Instructions()
		if err != nil {
			b.Fatal(err)
		}
		ratio := stat.Median(runs[v]) / stat.Median(runs[0])
		b.ReportMetric(stat.Median(runs[v]), variant.name+"-ns/pkt")
		b.ReportMetric(ratio, variant.name+"-ratio")
		table += fmt.Sprintf("%-10s %8.2f %6.3f %8d\n", variant.name, stat.Median(runs[v]), ratio, len(insns))
	}
	oi, err := o.ProgramInfo()
	if err != nil {
		b.Fatal(err)
	}
	oinsns, err := oi.Instructions()
	if err != nil {
		b.Fatal(err)
	}
	table += fmt.Sprintf("the observer (fexit) program: %d instructions\n", len(oinsns))
	b.ReportMetric(0, "ns/op")
	b.Log("\n" + table)
}

// checkCountedRuns: each observer counted every run.
func checkCountedRuns(b *testing.B, observers []*rxqobserve.Observer, want uint64) {
	b.Helper()
	for _, o := range observers {
		counts, err := o.Read()
		if err != nil {
			b.Fatal(err)
		}
		var seen uint64
		for _, c := range counts {
			seen += c.Packets
		}
		if seen != want {
			b.Errorf("the observer of program %d counted %d runs, want %d", o.Target(), seen, want)
		}
	}
}

// dispatchers loads the sized program with xdp-loader on two devices of
// their own and returns both dispatchers, the second with its component
// observed for packets of ifindex; nil where xdp-loader is missing or
// libxdp loads the program alone.
func dispatchers(b *testing.B, ifindex int) (plain, observed *ebpf.Program, o *rxqobserve.Observer) {
	b.Helper()
	if _, err := exec.LookPath("xdp-loader"); err != nil {
		b.Logf("no dispatcher variants: %v", err)
		return nil, nil, nil
	}
	var progs []*ebpf.Program
	for range 2 {
		pair := vethtest.Pair(b, 1)
		dev := pair.Host.Name
		if out, err := exec.Command("xdp-loader", "load", "-m", "native", dev, sizedObject).CombinedOutput(); err != nil {
			b.Fatalf("xdp-loader load: %v\n%s", err, out)
		}
		b.Cleanup(func() { _ = exec.Command("xdp-loader", "unload", "--all", dev).Run() })
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(vethtest.AttachedXDP(b, dev)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		d, err := xdpdispatch.Read(p, uint32(pair.Host.Index), "/sys/fs/bpf")
		if err != nil {
			b.Fatal(err)
		}
		if d == nil {
			b.Logf("no dispatcher variants: libxdp loaded the program alone")
			return nil, nil, nil
		}
		if len(progs) == 1 {
			comp, err := ebpf.NewProgramFromID(d.Components[0].Prog)
			if err != nil {
				b.Fatal(err)
			}
			defer comp.Close()
			if o, err = rxqobserve.New(comp, ifindex, 1); err != nil {
				b.Fatalf("observing the component: %v", err)
			}
			b.Cleanup(func() { o.Close() })
		}
		progs = append(progs, p)
	}
	return progs[0], progs[1], o
}

// TestObserveDispatcher loads the sized program with xdp-loader, which puts
// libxdp's dispatcher on the device (where the kernel has freplace) with
// the program behind it. Where the kernel puts a trampoline on the
// dispatcher, its observer counts the chain's verdicts; on a dispatcher of
// one component, which libxdp attaches in place of the entry function,
// Debian's 5.10 to 6.12 refuse with EBUSY, which New reports as
// ReasonBusy.
func TestObserveDispatcher(t *testing.T) {
	if _, err := exec.LookPath("xdp-loader"); err != nil {
		testenv.Unavailable(t, "xdp-loader not installed (xdp-tools; make deps)")
		return
	}
	pair := vethtest.Pair(t, 2)
	dev := pair.Host.Name
	if out, err := exec.Command("xdp-loader", "load", "-m", "native", dev, sizedObject).CombinedOutput(); err != nil {
		t.Fatalf("xdp-loader load: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("xdp-loader", "unload", "--all", dev).Run() })
	target := targetByID(t, vethtest.AttachedXDP(t, dev))
	info, err := target.Info()
	if err != nil {
		t.Fatal(err)
	}
	// libxdp loads the program alone where the kernel lacks freplace.
	mode := "direct"
	if info.Name == "xdp_dispatcher" {
		mode = "dispatcher"
	}
	var busy []rxqobserve.Reason
	if mode == "dispatcher" {
		busy = append(busy, rxqobserve.ReasonBusy)
	}
	o := observeOrUnsupported(t, target, pair.Host.Index, 2, busy...)
	if o == nil {
		return
	}
	t.Run(mode, func(t *testing.T) {
		const n = 1000
		vethtest.SendExactly(t, pair, n)
		vethtest.SendSized(t, pair, n, int(xdptest.SizedSizedSIZED_DROP_FROM))
		var want []rxqobserve.Count
		for q := range 2 {
			want = append(want,
				rxqobserve.Count{Queue: q, CPU: q, Verdict: rxqobserve.ObserverVerdictVERDICT_DROP, Packets: n / 2, Bytes: n / 2 * uint64(xdptest.SizedSizedSIZED_DROP_FROM)},
				rxqobserve.Count{Queue: q, CPU: q, Verdict: rxqobserve.ObserverVerdictVERDICT_PASS, Packets: n / 2, Bytes: n / 2 * trafficgen.MinFrameSize})
		}
		if got := read(t, o); !slices.Equal(got, want) {
			t.Errorf("counts through %s (program %q):\n got %+v\nwant %+v", mode, info.Name, got, want)
		}
	})
}
