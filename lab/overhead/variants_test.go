package overhead

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/procfs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/lab/stat"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// Variant is one thing measured: what it starts beside the packet path
// (a monitor, the exporter, nothing) and, for variants that bring their
// own XDP program, that program. Start returns the function that stops it.
type Variant struct {
	Name  string
	Start func() (stop func() error, err error)
}

// Bare is a variant that starts nothing.
func Bare(name string) Variant {
	return Variant{Name: name, Start: func() (func() error, error) { return func() error { return nil }, nil }}
}

// Process is a variant that runs a command for its duration and stops it
// with SIGTERM (then waits up to 10 s before SIGKILL). ready, when not nil,
// must become true before the variant counts as started: a monitor has
// attached, a program is on the device.
func Process(name string, ready func() (bool, error), argv ...string) Variant {
	return Variant{Name: name, Start: func() (func() error, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		stderr := &exportertest.Log{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		stop := func() error {
			select {
			case err := <-done:
				return fmt.Errorf("%s exited during the run: %v\n%s", argv[0], err, stderr.String())
			default:
			}
			_ = cmd.Process.Signal(unix.SIGTERM)
			select {
			case <-done:
				return nil
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				return fmt.Errorf("%s did not stop within 10 s of SIGTERM", argv[0])
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for ready != nil {
			ok, err := ready()
			if err != nil || ok {
				if err != nil {
					return nil, errors.Join(err, stop())
				}
				break
			}
			select {
			case err := <-done:
				done <- err
				return nil, fmt.Errorf("%s exited before it was ready: %v\n%s", argv[0], err, stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return nil, errors.Join(fmt.Errorf("%s not ready after 20 s\n%s", argv[0], stderr.String()), stop())
			}
		}
		return stop, nil
	}}
}

// Rig is the lab a measurement runs on: a pair whose peer end, in its own
// namespace, sends, and the loaded generator.
type Rig struct {
	Pair *vethns.Pair
	Gen  *trafficgen.Generator
}

// Config is one measurement.
type Config struct {
	// Pause is the time every variant gets after it started and before
	// traffic.
	Pause time.Duration
	// Frames per run, from SenderCPU.
	Frames    uint64
	SenderCPU int
	// Rate, when not zero, paces the sender (frames per second).
	Rate float64
	// Measure returns the figure of one run; Throughput when nil.
	Measure func(r *Rig, cfg Config) (float64, error)
	// Log, when not nil, gets a line per run.
	Log func(format string, args ...any)
}

// Result holds every run's figure, by round and variant (in the variants'
// order, whatever order they ran in), and the ratios to variant 0.
type Result struct {
	Names    []string
	variants []Variant
	Runs     [][]float64 // [round][variant]
	Ratios   [][]float64 // [round][variant], Runs / Runs[.][0]
}

// New prepares a measurement of variants; variant 0 is the base.
func New(variants []Variant) *Result {
	r := &Result{variants: variants}
	for _, v := range variants {
		r.Names = append(r.Names, v.Name)
	}
	return r
}

// Round runs every variant once, starting with variant round modulo
// their number: the order rotates by one every round.
func (res *Result) Round(ctx context.Context, r *Rig, cfg Config, round int) error {
	measure := cfg.Measure
	if measure == nil {
		measure = Throughput
	}
	runs := make([]float64, len(res.variants))
	for k := range res.variants {
		i := (round + k) % len(res.variants)
		v := res.variants[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		stop, err := v.Start()
		if err != nil {
			return fmt.Errorf("starting %s: %w", v.Name, err)
		}
		time.Sleep(cfg.Pause)
		runs[i], err = measure(r, cfg)
		if err = errors.Join(err, stop()); err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		if cfg.Log != nil {
			cfg.Log("round %2d  %-28s %10.4f", round, v.Name, runs[i])
		}
	}
	ratios := make([]float64, len(runs))
	for i, x := range runs {
		ratios[i] = x / runs[0]
	}
	res.Runs = append(res.Runs, runs)
	res.Ratios = append(res.Ratios, ratios)
	return nil
}

// Median returns variant i's median figure and median ratio over rounds.
func (r *Result) Median(i int) (figure, ratio float64) {
	var f, q []float64
	for round := range r.Runs {
		f = append(f, r.Runs[round][i])
		q = append(q, r.Ratios[round][i])
	}
	return stat.Median(f), stat.Median(q)
}

// Table renders the medians, one line per variant, with the ratios of
// every round.
func (r *Result) Table(unit string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %12s %8s  per-round ratios\n", "variant", unit, "ratio")
	for i, name := range r.Names {
		f, q := r.Median(i)
		var each []string
		for round := range r.Ratios {
			each = append(each, fmt.Sprintf("%.3f", r.Ratios[round][i]))
		}
		fmt.Fprintf(&b, "%-28s %12.4f %8.4f  %s\n", name, f, q, strings.Join(each, " "))
	}
	return b.String()
}

// sampleEvery is how often a run reads the DUT's counters; the first
// warmUp of a run and its last, partial interval are left out.
const (
	sampleEvery = 50 * time.Millisecond
	warmUp      = 200 * time.Millisecond
)

type sample struct {
	at      time.Time
	rx      uint64
	cpuTime uint64 // ns, of the DUT's NAPI threads (DUT CPU measure only)
}

// send runs cfg.Frames from the sender CPU (in one call at full speed, in
// paced slices at cfg.Rate) and returns the samples taken while it ran,
// read by read.
func send(r *Rig, cfg Config, read func() (sample, error)) ([]sample, error) {
	gen := trafficgen.Config{
		NS: r.Pair.NS, Ifindex: r.Pair.Peer.Index,
		SrcMAC: r.Pair.Peer.HardwareAddr, DstMAC: r.Pair.Host.HardwareAddr,
		Count: cfg.Frames, Rate: cfg.Rate, CPUs: []int{cfg.SenderCPU},
	}
	if cfg.Rate == 0 {
		// At full speed, one call: no call set-up inside the window.
		gen.Slice = cfg.Frames
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Gen.Run(context.Background(), gen)
		done <- err
	}()
	var samples []sample
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			// The last sample may straddle the end of the run.
			if len(samples) > 0 {
				samples = samples[:len(samples)-1]
			}
			if len(samples) < 2 {
				return nil, fmt.Errorf("run of %d frames too short to measure: %d samples after the %v warm-up", cfg.Frames, len(samples), warmUp)
			}
			return samples, nil
		case <-tick.C:
			if time.Since(start) < warmUp {
				continue
			}
			s, err := read()
			if err != nil {
				<-done
				return nil, err
			}
			samples = append(samples, s)
		}
	}
}

// rxPackets is the DUT's RX packet counter (rtnl_link_stats64): veth
// counts there every frame it takes from its peer, whatever its XDP
// program does with it.
func rxPackets(r *Rig) (uint64, error) {
	l, err := netlink.LinkByIndex(r.Pair.Host.Index)
	if err != nil {
		return 0, err
	}
	return l.Attrs().Statistics.RxPackets, nil
}

// Throughput is the DUT's receive rate in Mpps at full speed: the median
// of the rates over the sampling intervals of the run's steady part, so a
// host interruption of one interval (another tenant of the VM, a timer
// storm) does not move the figure. What the variants run in the kernel
// runs per event on the sender's CPU and lowers every interval alike; their
// user space runs on the other CPU (see PinProcess).
func Throughput(r *Rig, cfg Config) (float64, error) {
	s, err := send(r, cfg, func() (sample, error) {
		rx, err := rxPackets(r)
		return sample{at: time.Now(), rx: rx}, err
	})
	if err != nil {
		return 0, err
	}
	rates := make([]float64, 0, len(s)-1)
	for i := 1; i < len(s); i++ {
		rates = append(rates, float64(s[i].rx-s[i-1].rx)/s[i].at.Sub(s[i-1].at).Seconds()/1e6)
	}
	return stat.Median(rates), nil
}

// PinProcess moves every thread of this process to cpu. Threads and child
// processes made later inherit it; the generator's workers pin themselves
// to their own CPUs. The harness, the variants' processes and their user
// space then stay off the sender's CPU, where the measured packet path
// runs, whichever variant runs.
func PinProcess(cpu int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pinning thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// NapiThreads switches the DUT to threaded NAPI and pins its NAPI threads
// to cpu; it returns their pids and a function that switches threaded
// NAPI back off.
func NapiThreads(r *Rig, cpu int) ([]int, func() error, error) {
	dev := r.Pair.Host.Name
	path := "/sys/class/net/" + dev + "/threaded"
	if err := os.WriteFile(path, []byte("1"), 0); err != nil {
		return nil, nil, fmt.Errorf("enabling threaded NAPI on %s: %w", dev, err)
	}
	off := func() error { return os.WriteFile(path, []byte("0"), 0) }
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, nil, errors.Join(err, off())
	}
	// The threads are named napi/<dev>-<napi id>. Kernels that show a
	// kthread's full name in /proc/PID/comm (6.x) give all of it, older
	// ones the first 15 bytes.
	const commLen = 15
	want := "napi/" + dev + "-"
	match := func(comm string) bool {
		return strings.HasPrefix(comm, want) || (len(want) > commLen && comm == want[:commLen])
	}
	var pids []int
	deadline := time.Now().Add(5 * time.Second)
	for len(pids) == 0 && time.Now().Before(deadline) {
		procs, err := fs.AllProcs()
		if err != nil {
			return nil, nil, errors.Join(err, off())
		}
		for _, p := range procs {
			comm, err := p.Comm()
			if err == nil && match(comm) {
				pids = append(pids, p.PID)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) == 0 {
		return nil, nil, errors.Join(fmt.Errorf("no NAPI thread for %s", dev), off())
	}
	var set unix.CPUSet
	set.Set(cpu)
	for _, pid := range pids {
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("pinning NAPI thread %d to CPU %d: %w", pid, cpu, err), off())
		}
	}
	return pids, off, nil
}

// DUTCPU returns a Measure: the CPU time of the DUT's NAPI threads (pids,
// from NapiThreads) per received frame, in ns: the median over the
// sampling intervals of the run's steady part.
func DUTCPU(pids []int) func(r *Rig, cfg Config) (float64, error) {
	return func(r *Rig, cfg Config) (float64, error) {
		s, err := send(r, cfg, func() (sample, error) {
			rx, err := rxPackets(r)
			if err != nil {
				return sample{}, err
			}
			var ns uint64
			for _, pid := range pids {
				p, err := procfs.NewProc(pid)
				if err != nil {
					return sample{}, err
				}
				st, err := p.Schedstat()
				if err != nil {
					return sample{}, err
				}
				ns += st.RunningNanoseconds
			}
			return sample{at: time.Now(), rx: rx, cpuTime: ns}, nil
		})
		if err != nil {
			return 0, err
		}
		var perFrame []float64
		for i := 1; i < len(s); i++ {
			if rx := s[i].rx - s[i-1].rx; rx > 0 {
				perFrame = append(perFrame, float64(s[i].cpuTime-s[i-1].cpuTime)/float64(rx))
			}
		}
		if len(perFrame) == 0 {
			return 0, errors.New("the DUT received nothing")
		}
		return stat.Median(perFrame), nil
	}
}

// Attached reports whether dev has an XDP program attached: a variant that
// brings its own program is ready then.
func Attached(dev string) func() (bool, error) {
	return func() (bool, error) {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return false, err
		}
		x := l.Attrs().Xdp
		return x != nil && x.Attached, nil
	}
}

// Linked reports whether a BPF link holds a program whose name starts
// with prefix (names are cut to 15 bytes): a tracepoint monitor is ready
// then.
func Linked(prefix string) func() (bool, error) {
	return func() (bool, error) {
		it := new(link.Iterator)
		defer it.Close()
		for it.Next() {
			info, err := it.Link.Info()
			if err != nil {
				continue
			}
			p, err := ebpf.NewProgramFromID(info.Program)
			if err != nil {
				continue
			}
			pi, err := p.Info()
			p.Close()
			if err == nil && strings.HasPrefix(pi.Name, prefix[:min(len(prefix), 15)]) {
				return true, nil
			}
		}
		// A link that went away while listed (EAGAIN, ENOENT) is churn
		// from another process: not ready yet, ask again.
		return false, nil
	}
}

// Answers reports whether an HTTP server answers on addr: the exporter has
// built its collectors, and so attached their programs, then.
func Answers(addr string) func() (bool, error) {
	return func() (bool, error) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	}
}

// WithDrop is v with a bare XDP_DROP program attached to the DUT for its
// duration: the base of variants that bring their own program.
func WithDrop(r *Rig, v Variant) Variant {
	return Variant{Name: v.Name, Start: func() (func() error, error) {
		l, err := vethns.AttachVerdictTo(r.Pair.Host.Index, "xdpo_drop", xdptest.Drop)
		if err != nil {
			return nil, err
		}
		stop, err := v.Start()
		if err != nil {
			return nil, errors.Join(err, l.Close())
		}
		return func() error { return errors.Join(stop(), l.Close()) }, nil
	}}
}

// Slowed is a variant whose DUT program drops every frame after reads
// calls of bpf_ktime_get_ns: a program deliberately slower than the bare
// drop by a known amount of work, which a rig that measures the XDP path,
// not its sender, must see.
func Slowed(r *Rig, name string, reads int) Variant {
	return Variant{Name: name, Start: func() (func() error, error) {
		var insns asm.Instructions
		for range reads {
			insns = append(insns, asm.FnKtimeGetNs.Call())
		}
		insns = append(insns, asm.Mov.Imm(asm.R0, int32(xdptest.Drop)), asm.Return())
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xdpo_slowed", Type: ebpf.XDP, License: "GPL", Instructions: insns})
		if err != nil {
			return nil, fmt.Errorf("loading the slowed drop program: %w", err)
		}
		defer prog.Close() // the link holds its own reference
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: r.Pair.Host.Index})
		if err != nil {
			return nil, fmt.Errorf("attaching the slowed drop program: %w", err)
		}
		return l.Close, nil
	}}
}

// EmptyPrograms is a variant with a program that does nothing attached to
// each tracepoint (tp_btf names, without the group): the cost of the
// tracepoints' dispatch alone, the floor under any program on them.
func EmptyPrograms(name string, tracepoints ...string) Variant {
	return Variant{Name: name, Start: func() (func() error, error) {
		var closers []func() error
		stop := func() error {
			var errs []error
			for _, c := range closers {
				errs = append(errs, c())
			}
			return errors.Join(errs...)
		}
		for _, tp := range tracepoints {
			prog, l, err := AttachEmpty(tp)
			if err != nil {
				return nil, errors.Join(err, stop())
			}
			closers = append([]func() error{l.Close}, append(closers, prog.Close)...)
		}
		return stop, nil
	}}
}

// AttachEmpty loads a tp_btf program that does nothing and attaches it to
// tracepoint tp: the floor of any program there, in throughput and in the
// kernel's run-time statistics.
func AttachEmpty(tp string) (*ebpf.Program, link.Link, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "empty", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp,
		AttachTo: tp, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("loading an empty program on %s: %w", tp, err)
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		prog.Close()
		return nil, nil, fmt.Errorf("attaching an empty program to %s: %w", tp, err)
	}
	return prog, l, nil
}
