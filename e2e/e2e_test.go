package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/vishvananda/netlink"
	"go.yaml.in/yaml/v3"

	"github.com/xdp-exporter/xdp_exporter/dashboards"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

var ruleFiles = []string{"../dashboards/rules/recording.yml", "../dashboards/rules/lab.yml", "../dashboards/rules/alerts.yml"}

// noDataHere lists the non-exempt panel queries the lab cannot make return
// data, with the reason. Everything else must return data.
var noDataHere = map[string]string{
	"Packets the rxq program could not attribute": "veth never delivers a frame with an out-of-range RX queue or a foreign ifindex",
	"Firing XDP alerts":                           "every alert has a for: duration longer than this test runs",
	"Failing exporter collectors":                 "no collector fails on this host; what its kernel lacks shows as unsupported",
}

// phase is one step of the short sweep.
type phase struct {
	sc     lab.Scenario
	queues int
	rate   float64
	// checkRate compares Prometheus' rate() with the generator's rate.
	checkRate bool
	// read has the rxq program read packet data (--collector.rxq.read).
	read bool
}

var phases = []phase{
	{lab.Drop, 1, 100_000, false, false},
	{lab.Drop, 2, 200_000, true, false},
	{lab.Drop, 2, 200_000, false, true},
	{lab.TX, 1, 100_000, false, false},
	{lab.TX, 2, 200_000, true, false},
	{lab.Redirect, 1, 100_000, false, false},
	{lab.Redirect, 2, 200_000, true, false},
	{lab.Pass, 2, 200_000, true, false},
	// No XDP program: the Linux series of the XDP_PASS figure.
	{lab.Linux, 2, 200_000, false, false},
}

// phaseDuration holds each step long enough for the figures' steady
// points: two rate windows (2 x 4s) inside the step, plus scrape delays.
const phaseDuration = 14 * time.Second

// TestLabWithPrometheus drives the lab through a short sweep with the real
// exporter attached to the DUT and a real Prometheus scraping it every
// second. It checks that Prometheus' rates match the generator, that every
// dashboard and rule expression evaluates, that every panel has data
// except those needing hardware the lab lacks, and writes the paper
// figures' points as CSV.
func TestLabWithPrometheus(t *testing.T) {
	testenv.Privileged(t)
	for _, tool := range []string{"prometheus", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "%s not installed", tool)
		}
	}
	// A lab of the test's own: a lab a user has up is left alone.
	lb := lab.ForTest(vethns.UniqueID())
	if err := lb.Up(2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lb.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	addr := exportertest.FreeAddr(t)
	prom := promtest.Start(t, []string{addr}, ruleFiles...)
	vars := dashboards.Vars{Instance: addr, Device: ".*", RateInterval: 4 * time.Second}
	queries := dashboards.Queries()
	seen := make([]bool, len(queries))
	ctx := context.Background()

	evaluate := func(when string) {
		for i, q := range queries {
			v, err := prom.Query(ctx, q.Expand(vars))
			if err != nil {
				t.Errorf("%s / %s (%s): %v", q.Dashboard, q.Panel, when, err)
				continue
			}
			if vec, ok := v.(model.Vector); ok && len(vec) > 0 {
				seen[i] = true
			}
		}
	}

	sweepStart := time.Now()
	for _, ph := range phases {
		runPhase(t, lb, addr, prom, ph, evaluate)
	}
	figures := xyCharts(t, prom, vars, sweepStart, time.Now())
	checkSweepSteps(t, figures)

	eventsPhase(t, lb, addr, prom, evaluate)
	evaluateRules(t, prom)

	for i, q := range queries {
		// A figure's live series has points only inside a step of the
		// sweep (steady points), not at the step's end where the panels
		// are evaluated; xyCharts requires its points over the sweep.
		if seen[i] || q.Exempt != "" || q.Figure {
			continue
		}
		if reason, ok := noDataHere[q.Panel]; ok {
			t.Logf("no data, as expected here: %s / %s: %s", q.Dashboard, q.Panel, reason)
			continue
		}
		t.Errorf("no data for %s / %s [%s]: %s", q.Dashboard, q.Panel, q.RefID, q.Expr)
	}
	for _, e := range dashboards.ExemptPanels() {
		t.Logf("exempt: %s / %s: %s", e.Dashboard, e.Panel, e.Reason)
	}
	writeFigures(t, figures)
	logScrapeCost(t, prom, addr)
}

// runPhase runs one step of the sweep with an exporter of its own, checks
// that the exporter counted what the generator sent and that Prometheus'
// rate matches it, and evaluates every panel.
func runPhase(t *testing.T, lb lab.Lab, addr string, prom *promtest.Server, ph phase, evaluate func(when string)) {
	ctx := context.Background()
	name := fmt.Sprintf("%s-%dq", ph.sc, ph.queues)
	if ph.read {
		name += "-read"
	}
	args := []string{"--collector.perf", "--collector.monitor.xmit"}
	if ph.sc == lab.Linux {
		// The stack drops every frame (NETFILTER_DROP): the drop panel's data.
		args = append(args, "--collector.drop")
	} else {
		args = append(args, "--collector.rxq", "--collector.rxq.device="+lb.DUT, "--collector.rxq.action="+string(ph.sc))
	}
	if ph.sc == lab.Redirect {
		args = append(args, "--collector.rxq.redirect-device="+lb.Egress)
	}
	if ph.read {
		args = append(args, "--collector.rxq.read")
	}
	exp := exportertest.Run(t, addr, args...)
	if ph.sc == lab.Linux {
		waitFor(t, prom, fmt.Sprintf(`xdp_scrape_collector_success{instance=%q,collector="napi"}`, addr))
	} else {
		waitFor(t, prom, fmt.Sprintf(`xdp_rxq_info{instance=%q,action=%q}`, addr, ph.sc))
	}

	res, err := lb.Run(ctx, lab.RunConfig{Scenario: ph.sc, Queues: ph.queues, Rate: ph.rate,
		Size: trafficgen.MinFrameSize, Duration: phaseDuration})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	end := time.Now()
	// The exporter attached its program just before the run and the
	// lab is quiet otherwise: its counters must equal what was sent.
	if got := exp.Sum(t, "xdp_rxq_packets_total", "device", lb.DUT); ph.sc != lab.Linux && got != float64(res.Sent) {
		t.Errorf("%s: exporter counted %v frames, generator sent %d", name, got, res.Sent)
	}
	time.Sleep(2 * time.Second) // two more scrapes cover the end of the run
	if ph.checkRate {
		// Nearly the whole run, so the window and the generator's
		// average cover the same stalls on a shared machine.
		got := scalarAt(t, prom, fmt.Sprintf(`sum(rate(xdp_rxq_packets_total{instance=%q,device=%q}[%ds]))`,
			addr, lb.DUT, int(phaseDuration.Seconds())-1), end)
		want := res.SentPPS()
		t.Logf("%s: Prometheus rate %.0f pps, generator %.0f pps (%.2f%%)", name, got, want, 100*(got-want)/want)
		if math.Abs(got-want)/want > 0.05 {
			t.Errorf("%s: rate() %.0f pps differs from the generator's %.0f pps by more than 5%%", name, got, want)
		}
	}
	evaluate(name)
	exp.Stop(t)
}

// eventsPhase makes the events some panels need and the sweep does not:
// an XDP exception, failing redirects (ENETDOWN), and cpumap traffic. The
// panels are evaluated while each program is still attached: once it is
// gone the exporter deletes its keys and the series end.
func eventsPhase(t *testing.T, lb lab.Lab, addr string, prom *promtest.Server, evaluate func(when string)) {
	// BPF statistics on, for the run time of the programs on the DUT.
	exp := exportertest.Run(t, addr, "--collector.monitor.xmit", "--collector.bpf.enable-stats")
	waitFor(t, prom, fmt.Sprintf(`xdp_scrape_collector_success{instance=%q,collector="monitor"}`, addr))
	dut, err := net.InterfaceByName(lb.DUT)
	if err != nil {
		t.Fatal(err)
	}
	egress, err := netlink.LinkByName(lb.Egress)
	if err != nil {
		t.Fatal(err)
	}
	send := func(what string, attachFn func() (interface{ Close() error }, error)) {
		a, err := attachFn()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer a.Close()
		if _, err := lb.Run(context.Background(), lab.RunConfig{Scenario: lab.Drop, Queues: 1, Rate: 50_000,
			Size: trafficgen.MinFrameSize, Duration: 3 * time.Second}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(2 * time.Second) // two more scrapes cover the end of the run
		evaluate(what)
	}
	send("XDP_ABORTED", func() (interface{ Close() error }, error) { return abortOn(dut.Index) })
	if err := netlink.LinkSetDown(egress); err != nil {
		t.Fatal(err)
	}
	send("redirect to a device that is down", func() (interface{ Close() error }, error) {
		return devmapRedirect(dut.Index, egress.Attrs().Index)
	})
	if err := netlink.LinkSetUp(egress); err != nil {
		t.Fatal(err)
	}
	send("cpumap redirect", func() (interface{ Close() error }, error) { return cpumapRedirect(dut.Index, 1) })
	// A tc filter on the DUT's ingress runs on what XDP passes to the
	// stack: the tc path beside XDP in the run view.
	vethtest.AttachTC(t, dut.Index, "ingress", 1, vethtest.TCProgram(t, "e2e_tc_ingress"))
	send("a tc program behind XDP_PASS", func() (interface{ Close() error }, error) { return passOn(dut.Index) })
	exp.Stop(t)
}

// evaluateRules evaluates every expression of every rule file: each must
// be valid PromQL against the live data (data is not required: most
// alerts are quiet in a healthy lab).
func evaluateRules(t *testing.T, prom *promtest.Server) {
	for _, path := range ruleFiles {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Groups []struct {
				Rules []struct {
					Record, Alert, Expr string
				}
			}
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		n := 0
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if _, err := prom.Query(context.Background(), r.Expr); err != nil {
					t.Errorf("%s %s%s: %v", path, r.Record, r.Alert, err)
				}
				n++
			}
		}
		t.Logf("%s: %d rule expressions evaluated", filepath.Base(path), n)
	}
}

// writeFigures writes each XY chart's live points, as Grafana draws them,
// as CSV under $XDP_EXPORTER_FIGURES (default: the test's temp dir).
// sweepSeries names the steps each live series of a scaling figure plots.
// An XDP series counts what its program saw, every frame sent (the sweep
// checks the counts exactly). The Linux series counts what NAPI delivered
// to the stack, which falls short of what was sent while the stack cannot
// keep up (one run here held a steady 0.147 of the step's 0.2 Mpps), so
// it is held to at most the step's rate.
var sweepSeries = map[string]struct {
	match  func(phase) bool
	atMost bool
}{
	"XDP_DROP no_touch (live)": {match: func(p phase) bool { return p.sc == lab.Drop && !p.read }},
	"XDP_DROP read (live)":     {match: func(p phase) bool { return p.sc == lab.Drop && p.read }},
	"XDP_PASS (live)":          {match: func(p phase) bool { return p.sc == lab.Pass }},
	"Linux, no XDP (live)":     {match: func(p phase) bool { return p.sc == lab.Linux }, atMost: true},
	"XDP_TX (live)":            {match: func(p phase) bool { return p.sc == lab.TX }},
	"TX (live)":                {match: func(p phase) bool { return p.sc == lab.TX }},
	"XDP_REDIRECT (live)":      {match: func(p phase) bool { return p.sc == lab.Redirect }},
	"REDIRECT (live)":          {match: func(p phase) bool { return p.sc == lab.Redirect }},
}

// stepTolerance is how far a figure's point may sit from its step's rate:
// a 4s window of a shared machine's generator strays by a few percent
// (one run here: 0.1939 to 0.2052 Mpps on a 0.2 step), while the steps of
// the sweep lie 100% apart.
const stepTolerance = 0.1

// checkSweepSteps holds the scaling figures to the sweep: each point of a
// live series sits on one of its steps (x the step's queues, which the
// lab runs on as many CPUs; y the step's rate within stepTolerance), and
// each step draws points. The ramps between steps draw none.
func checkSweepSteps(t *testing.T, figures map[string][][]string) {
	t.Helper()
	drawn := map[string]map[int]int{}
	for panel, rows := range figures {
		for _, r := range rows {
			s, ok := sweepSeries[r[0]]
			if !ok {
				continue
			}
			x, errX := strconv.ParseFloat(r[1], 64)
			y, errY := strconv.ParseFloat(r[2], 64)
			if errX != nil || errY != nil {
				t.Fatalf("%s / %s: point %v", panel, r[0], r[1:])
			}
			on := false
			for i, p := range phases {
				want := p.rate / 1e6
				near := math.Abs(y-want) <= stepTolerance*want
				if s.atMost {
					near = y > 0 && y <= (1+stepTolerance)*want
				}
				if s.match(p) && x == float64(p.queues) && near {
					on = true
					key := panel + " / " + r[0]
					if drawn[key] == nil {
						drawn[key] = map[int]int{}
					}
					drawn[key][i]++
				}
			}
			if !on {
				t.Errorf("%s / %s: point (%v, %v) is on no step of the sweep", panel, r[0], r[1], r[2])
			}
		}
	}
	for panel, rows := range figures {
		series := map[string]bool{}
		for _, r := range rows {
			series[r[0]] = true
		}
		for name := range series {
			s, ok := sweepSeries[name]
			if !ok {
				continue
			}
			for i, p := range phases {
				if s.match(p) && drawn[panel+" / "+name][i] == 0 {
					t.Errorf("%s / %s: the %s step with %d queues at %.0f pps drew no point", panel, name, p.sc, p.queues, p.rate)
				}
			}
		}
	}
}

func writeFigures(t *testing.T, figures map[string][][]string) {
	dir := os.Getenv("XDP_EXPORTER_FIGURES")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for panel, rows := range figures {
		sort.Slice(rows, func(i, j int) bool { return strings.Join(rows[i], ",") < strings.Join(rows[j], ",") })
		path := filepath.Join(dir, slug(panel)+".csv")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := csv.NewWriter(f)
		_ = w.Write([]string{"series", "x", "y"})
		_ = w.WriteAll(rows)
		f.Close()
		t.Logf("figure %q: %d points in %s", panel, len(rows), path)
	}
}

func slug(s string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, s), "-")
}

// logScrapeCost reports the scrape's own duration and sample count, as
// Prometheus saw them.
func logScrapeCost(t *testing.T, prom *promtest.Server, addr string) {
	ctx := context.Background()
	for _, m := range []string{"scrape_duration_seconds", "scrape_samples_scraped"} {
		for _, fn := range []string{"max_over_time", "avg_over_time"} {
			v, err := prom.Scalar(ctx, fmt.Sprintf(`%s(%s{instance=%q}[5m])`, fn, m, addr))
			if err != nil {
				t.Errorf("%s: %v", m, err)
				continue
			}
			t.Logf("%s %s = %g", fn, m, v)
		}
	}
}

func waitFor(t *testing.T, prom *promtest.Server, expr string) {
	t.Helper()
	if !waitForDuring(prom, expr, 30*time.Second) {
		t.Fatalf("Prometheus has no %s after 30s", expr)
	}
}

func scalarAt(t *testing.T, prom *promtest.Server, expr string, at time.Time) float64 {
	t.Helper()
	v, _, _, err := prom.API.Query(context.Background(), expr, at)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 {
		t.Fatalf("%s at %s: %v, want one sample", expr, at.Format(time.RFC3339), v)
	}
	return float64(vec[0].Value)
}
