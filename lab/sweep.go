package lab

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// SweepConfig describes the paper's experiments in miniature.
type SweepConfig struct {
	MaxQueues int           // queues 1..MaxQueues (capped at the CPU count)
	Size      int           // frame size without FCS
	Duration  time.Duration // per point
	// Loads are fractions of the single-queue XDP_DROP maximum offered in
	// the CPU-usage experiment.
	Loads  []float64
	OutDir string
	Attach AttachFunc
	Log    io.Writer
	// Method forces the generator's method; empty: the fastest the
	// kernel allows.
	Method trafficgen.Method
}

// ScalingRow is one line of the "Mpps vs cores" tables.
type ScalingRow struct {
	Queues int
	PPS    map[Scenario]float64
}

// LoadRow is one line of the "CPU usage vs offered load" table.
type LoadRow struct {
	OfferedPPS float64
	Busy       map[Scenario]float64 // % of the RX CPU spent in softirq
}

// SweepResult holds both experiments.
type SweepResult struct {
	Scaling []ScalingRow
	Load    []LoadRow
	Files   []string
	// Method is the generator's method, the same for every point.
	Method trafficgen.Choice
}

// scalingScenarios are measured at every queue count.
var scalingScenarios = []Scenario{Drop, Redirect, TX, Linux}

// Sweep runs both experiments, writes CSV and figures to OutDir and returns
// the tables.
func (lb Lab) Sweep(ctx context.Context, cfg SweepConfig) (SweepResult, error) {
	var res SweepResult
	maxQ := min(cfg.MaxQueues, runtime.NumCPU())
	if maxQ < 1 {
		return res, fmt.Errorf("no queues to sweep (lab queues %d, CPUs %d)", cfg.MaxQueues, runtime.NumCPU())
	}
	run := func(sc Scenario, q int, rate float64) (Result, error) {
		r, err := lb.Run(ctx, RunConfig{Scenario: sc, Queues: q, Size: cfg.Size, Rate: rate, Duration: cfg.Duration, Attach: cfg.Attach, Method: cfg.Method})
		if err != nil {
			return r, fmt.Errorf("%s with %d queues: %w", sc, q, err)
		}
		if res.Method.Method == "" {
			res.Method = r.Method
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "generator: %s\n", r.Method)
				if r.Method.Slow() {
					fmt.Fprintf(cfg.Log, "generator: %s\n", SlowWarning)
				}
			}
		}
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "%-8s queues %d offered %12s: received %12s pps, RX CPUs %%soft %5.1f\n",
				sc, q, rateName(rate), human(r.RxPPS()), r.SoftPct)
		}
		return r, nil
	}
	for q := 1; q <= maxQ; q++ {
		row := ScalingRow{Queues: q, PPS: map[Scenario]float64{}}
		for _, sc := range scalingScenarios {
			r, err := run(sc, q, 0)
			if err != nil {
				return res, err
			}
			row.PPS[sc] = r.RxPPS()
		}
		res.Scaling = append(res.Scaling, row)
	}
	maxDrop := res.Scaling[0].PPS[Drop]
	for _, f := range cfg.Loads {
		rate := f * maxDrop
		row := LoadRow{OfferedPPS: rate, Busy: map[Scenario]float64{}}
		for _, sc := range []Scenario{Drop, Linux} {
			r, err := run(sc, 1, rate)
			if err != nil {
				return res, err
			}
			row.Busy[sc] = r.SoftPct
		}
		res.Load = append(res.Load, row)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return res, err
	}
	files, err := res.write(cfg.OutDir)
	res.Files = files
	return res, err
}

func rateName(r float64) string {
	if r == 0 {
		return "max"
	}
	return human(r)
}

func (r SweepResult) write(dir string) ([]string, error) {
	m := string(r.Method.Method)
	scaling := [][]string{{"rxqs", "xdp_drop_pps", "xdp_redirect_pps", "xdp_tx_pps", "linux_raw_drop_pps", "generator"}}
	for _, row := range r.Scaling {
		scaling = append(scaling, []string{strconv.Itoa(row.Queues),
			f0(row.PPS[Drop]), f0(row.PPS[Redirect]), f0(row.PPS[TX]), f0(row.PPS[Linux]), m})
	}
	load := [][]string{{"offered_mpps", "xdp_cpu_pct", "linux_cpu_pct", "generator"}}
	for _, row := range r.Load {
		load = append(load, []string{fmt.Sprintf("%.3f", row.OfferedPPS/1e6),
			fmt.Sprintf("%.1f", row.Busy[Drop]), fmt.Sprintf("%.1f", row.Busy[Linux]), m})
	}
	var files []string
	for name, rows := range map[string][][]string{"scaling.csv": scaling, "cpu-load.csv": load} {
		path := filepath.Join(dir, name)
		if err := writeCSV(path, rows); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	figs, err := r.plot(dir)
	return append(files, figs...), err
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Tables renders the results in the benchmark notes' Markdown table style.
func (r SweepResult) Tables() string {
	var b strings.Builder
	fmt.Fprintf(&b, "generator: %s\n\n", r.Method)
	b.WriteString("| RXQs | XDP_DROP | XDP_REDIRECT | XDP_TX | Linux (raw) |\n|---|---|---|---|---|\n")
	for _, row := range r.Scaling {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", row.Queues,
			f0(row.PPS[Drop]), f0(row.PPS[Redirect]), f0(row.PPS[TX]), f0(row.PPS[Linux]))
	}
	b.WriteString("\n| Mpps | XDP | Linux |\n|---|---|---|\n")
	for _, row := range r.Load {
		fmt.Fprintf(&b, "| %.2f | %.1f | %.1f |\n", row.OfferedPPS/1e6, row.Busy[Drop], row.Busy[Linux])
	}
	return b.String()
}
