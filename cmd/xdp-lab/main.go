// Command xdp-lab is the XDP benchmark bench on veth: it builds a namespace
// and veth pairs (up/down), drives traffic with the kernel's live-frame
// generator against the exporter's own rxq program (run), runs the XDP
// paper's experiments in miniature (sweep), and says which ways of sending
// frames the kernel allows (methods).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf/rlimit"

	"github.com/xdp-exporter/xdp_exporter/lab"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "xdp-lab: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	lb := lab.Default()
	app := kingpin.New("xdp-lab", "XDP benchmark bench on veth pairs in a network namespace.")
	app.HelpFlag.Short('h')

	up := app.Command("up", "Create the lab namespace and veth pairs.")
	upQueues := up.Flag("queues", "RX/TX queues per veth device.").Default("2").Int()

	app.Command("down", "Remove everything the lab made, and only that.")

	runCmd := app.Command("run", "Drive one scenario against the DUT.")
	scenario := runCmd.Flag("scenario", "drop, pass, tx, redirect, linux (iptables raw DROP, no XDP), or nosocket (no XDP: the whole stack, to a UDP port with no socket).").Default("drop").String()
	queues := runCmd.Flag("queues", "RX queues to load: one generator pinned to each CPU 0..N-1.").Default("1").Int()
	size := runCmd.Flag("size", "Frame size in bytes without FCS (60 = 64-byte frames).").Default("60").Int()
	rate := runCmd.Flag("rate", "Offered frames per second in total, or max.").Default("max").String()
	duration := runCmd.Flag("duration", "How long to send.").Default("10s").Duration()
	attach := runCmd.Flag("attach", "Attach the exporter's rxq program to the DUT for the run; with --no-attach, the exporter must already run with --collector.rxq.device="+lb.DUT+".").Default("true").Bool()

	sweep := app.Command("sweep", "Scenario x queues at max rate, and a ladder of offered loads; writes CSV and figures.")
	sweepSize := sweep.Flag("size", "Frame size in bytes without FCS.").Default("60").Int()
	sweepDuration := sweep.Flag("duration", "Duration of each point.").Default("3s").Duration()
	sweepLoads := sweep.Flag("loads", "Offered loads for the CPU-usage figure, as fractions of the single-queue XDP_DROP maximum.").Default("0.1,0.25,0.5,0.75,1").String()
	sweepOut := sweep.Flag("out", "Directory for the CSV files and figures.").Default("xdp-lab-results").String()

	methodHelp := "How the generator sends: auto (the fastest the kernel allows), live (BPF_PROG_RUN live frames), broadcast (a devmap broadcast loop, for kernels that refuse live frames) or packet (AF_PACKET, slow). Overrides $" + trafficgen.MethodEnv + "."
	runMethod := runCmd.Flag("method", methodHelp).Default("auto").Enum("auto", "live", "broadcast", "packet")
	sweepMethod := sweep.Flag("method", methodHelp).Default("auto").Enum("auto", "live", "broadcast", "packet")

	methods := app.Command("methods", "Which of the generator's methods this kernel allows, and the one auto takes.")
	methodsOthers := methods.Flag("others", "Print only the names of the methods the kernel allows besides the one auto takes, one a line (for scripts).").Bool()

	cmd, err := app.Parse(args)
	if err != nil {
		return fmt.Errorf("%w (try --help)", err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for namespaces, CAP_BPF to load programs)", cmd)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return fmt.Errorf("lifting RLIMIT_MEMLOCK for BPF: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case "up":
		if err := lb.Up(*upQueues); err != nil {
			return err
		}
		fmt.Fprintf(out, "lab up: %s (DUT) <-> %s/%s, %s <-> %s/%s, %d queues\n",
			lb.DUT, lb.Namespace, lb.Gen, lb.Egress, lb.Namespace, lb.Sink, *upQueues)
		return nil
	case "down":
		return lb.Down()
	case "run":
		m, err := trafficgen.ParseMethod(*runMethod)
		if err != nil {
			return err
		}
		return runScenario(ctx, lb, out, runFlags{*scenario, *rate, lab.RunConfig{Queues: *queues, Size: *size, Duration: *duration, Progress: out, Method: m}, *attach})
	case "sweep":
		m, err := trafficgen.ParseMethod(*sweepMethod)
		if err != nil {
			return err
		}
		return runSweep(ctx, lb, out, *sweepLoads, lab.SweepConfig{Size: *sweepSize, Duration: *sweepDuration, OutDir: *sweepOut, Attach: lb.AttachRxq, Log: out, Method: m})
	case "methods":
		return listMethods(out, *methodsOthers)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// runFlags are the flags of the run command that need parsing.
type runFlags struct {
	scenario, rate string
	cfg            lab.RunConfig
	attach         bool
}

func runScenario(ctx context.Context, lb lab.Lab, out io.Writer, f runFlags) error {
	sc, err := lab.ParseScenario(f.scenario)
	if err != nil {
		return err
	}
	r, err := parseRate(f.rate)
	if err != nil {
		return err
	}
	cfg := f.cfg
	cfg.Scenario, cfg.Rate = sc, r
	if f.attach {
		cfg.Attach = lb.AttachRxq
	}
	res, err := lb.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n| RXQs | scenario | size | sent pps | received pps | sent | received | %%soft | %%idle |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(out, "| %d | %s | %d | %.0f | %.0f | %d | %d | %.1f | %.1f |\n", res.Queues, res.Scenario, res.Size,
		res.SentPPS(), res.RxPPS(), res.Sent, res.Received, res.SoftPct, res.IdlePct)
	return nil
}

func runSweep(ctx context.Context, lb lab.Lab, out io.Writer, loadList string, cfg lab.SweepConfig) error {
	for _, f := range strings.Split(loadList, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("--loads: %q is not a positive fraction", f)
		}
		cfg.Loads = append(cfg.Loads, v)
	}
	dut, err := lb.Queues()
	if err != nil {
		return err
	}
	cfg.MaxQueues = dut
	res, err := lb.Sweep(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s\nwrote: %s\n", res.Tables(), strings.Join(res.Files, ", "))
	return nil
}

// listMethods probes every method as a run would.
func listMethods(out io.Writer, othersOnly bool) error {
	g, err := trafficgen.New()
	if err != nil {
		return err
	}
	defer g.Close()
	auto, err := g.Choose("")
	if err != nil {
		return err
	}
	if !othersOnly {
		fmt.Fprintf(out, "a run without --method: %s\n", auto)
	}
	for _, m := range trafficgen.Methods {
		_, err := g.Choose(m)
		switch {
		case othersOnly:
			if err == nil && m != auto.Method {
				fmt.Fprintln(out, m)
			}
		case err != nil:
			fmt.Fprintf(out, "%s: refused: %v\n", m, err)
		default:
			fmt.Fprintf(out, "%s: allowed\n", m)
		}
	}
	return nil
}

func parseRate(s string) (float64, error) {
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("--rate %q: want frames per second or max", s)
	}
	return v, nil
}
