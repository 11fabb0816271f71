package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/dashboards"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// fleetHost is one host of the fleet: a veth pair of its own and an
// exporter, on a loopback address of its own, whose device collectors
// see that pair alone.
type fleetHost struct {
	pair     *vethns.Pair
	addr     string
	instance string // the address without the port, as edge.yml relabels it
}

// onlyDevice is the --collector.NAME.device-include flag (read from the
// exporter's --help, as a user would find them) of every default
// collector that has one, each set to dev.
func onlyDevice(t *testing.T, dev string) []string {
	out, err := exec.Command(exportertest.Build(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("xdp_exporter --help: %v\n%s", err, out)
	}
	defaults := map[string]bool{}
	for _, r := range collector.Registrations() {
		defaults[r.Name] = r.DefaultEnabled
	}
	var args []string
	for _, m := range regexp.MustCompile(`--collector\.(\w+)\.device-include=`).FindAllStringSubmatch(string(out), -1) {
		if defaults[m[1]] {
			args = append(args, "--collector."+m[1]+".device-include=^"+regexp.QuoteMeta(dev)+"$")
		}
	}
	if len(args) < 5 {
		t.Fatalf("--help names %d device-include flags:\n%s", len(args), out)
	}
	return args
}

// startFleet starts n hosts, each a veth pair and the real exporter on
// 127.0.0.(i+2) with its device collectors on that pair alone and the rxq
// collector passing its packets.
func startFleet(t *testing.T, n int) []fleetHost {
	hosts := make([]fleetHost, n)
	for i := range hosts {
		pair := vethtest.Pair(t, 1)
		addr := exportertest.FreeAddrOn(t, fmt.Sprintf("127.0.0.%d", i+2))
		args := append(onlyDevice(t, pair.Host.Name),
			"--collector.rxq", "--collector.rxq.device="+pair.Host.Name, "--collector.rxq.action=pass")
		exportertest.Run(t, addr, args...)
		hosts[i] = fleetHost{pair: pair, addr: addr, instance: strings.Split(addr, ":")[0]}
	}
	return hosts
}

// send runs the generator into pair at rate frames/s in calls of slice
// frames each, until ctx ends.
func send(ctx context.Context, pair *vethns.Pair, rate float64, slice uint64, cpus []int) error {
	g, err := trafficgen.New()
	if err != nil {
		return err
	}
	defer g.Close()
	_, err = g.Run(ctx, trafficgen.Config{NS: pair.NS, Ifindex: pair.Peer.Index,
		SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
		Rate: rate, Slice: slice, CPUs: cpus})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// load runs the generators of one phase: the hosts in burst get the
// lab notes' case at the rate given (bursts the ring cannot absorb while
// the CPUs idle), the others a trickle. The returned function stops them,
// once however often it is called.
func load(t *testing.T, hosts []fleetHost, burst map[int]float64) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		rate, slice, cpus := float64(quietRate), uint64(quietFrames), []int{0}
		if r, ok := burst[i]; ok {
			rate, slice, cpus = r, burstFrames, []int{0, 1}
		}
		wg.Go(func() { errs[i] = send(ctx, h.pair, rate, slice, cpus) })
	}
	return sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("generator into %s: %v", hosts[i].pair.Host.Name, err)
			}
		}
	})
}

// Burst is the seed's case made on a veth: bursts of burstFrames from
// two CPUs at once into a one-queue veth, at burstRate frames/s on
// average, overflow the queue's ring (veth's XDP ring holds 256 frames,
// which NAPI drains on one CPU while the other fills it) and are dropped
// for lack of room while the RX CPUs sit idle between bursts: what a NIC
// does on microbursts the host cannot absorb. The two CPUs' bursts meet
// because the generator paces its workers from one start (their slices
// fall due together): 18,100 and 18,200 drops a second in two runs at
// this rate. While each worker paced from its own start, their lasting
// random offset gave 0 to 27,000 a second, hence the test's lower floor
// (fleetRules). The other
// hosts get a steady trickle from one CPU in calls of one NAPI batch,
// which the ring holds.
const (
	burstRate   = 240_000
	burstFrames = 20_000
	quietRate   = 3_000
	quietFrames = 64
)

// TestFleetRemoteWrite runs a fleet: three hosts, two edge Prometheus
// servers (one for two hosts, one for the third) with the edge rules and
// deploy/prometheus/edge.yml's remote write, and one global Prometheus
// receiving it (--web.enable-remote-write-receiver, the protocol of
// Mimir and Thanos Receive) with the global rules. Every fleet-view
// query with data at an edge has data for the same hosts at the global
// tier, the seed's case at one host fires the global tier's
// XDPFleetHostDropsWhileRXCPUsIdle for it alone and no fleet-wide alert,
// and the series each host ships are counted.
func TestFleetRemoteWrite(t *testing.T) {
	testenv.Privileged(t)
	if _, err := exec.LookPath("prometheus"); err != nil {
		testenv.Unavailable(t, "prometheus not installed (apt-get install prometheus)")
	}
	ruleDir := fleetRules(t)
	hosts := startFleet(t, 3)
	global := promtest.StartConfig(t, promtest.Place(t, "../deploy/prometheus/global.yml",
		promtest.Placement{Interval: time.Second, RuleDir: ruleDir}), "--web.enable-remote-write-receiver")
	edge := func(name string, hs ...fleetHost) *promtest.Server {
		var targets []string
		for _, h := range hs {
			targets = append(targets, h.addr)
		}
		return promtest.StartConfig(t, promtest.Place(t, "../deploy/prometheus/edge.yml", promtest.Placement{
			Targets: targets, Interval: time.Second, RuleDir: ruleDir,
			ExternalLabels: map[string]string{"cluster": "dc1", "prometheus": name}, WriteURL: global.WriteURL()}))
	}
	edges := []*promtest.Server{edge("rack1", hosts[0], hosts[1]), edge("rack2", hosts[2])}
	waitFor(t, global, `count(up{job="xdp"} == 1) == 3`)

	defer load(t, hosts, map[int]float64{0: burstRate})()

	firing := fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, dashboards.AlertFleetHostDrops)
	if !waitForDuring(global, firing, 90*time.Second) {
		for _, q := range []string{"instance_device:xdp_nic_rx_host_drops:rate1m", "instance:xdp_rx_cpus_idle:avg_ratio",
			"instance:xdp_processed_packets:rate1m", "instance_device:xdp_nic_rx_host_drops_while_rx_idle:rate1m"} {
			v, err := global.Query(context.Background(), q)
			t.Logf("at the global tier: %s = %v (%v)", q, v, err)
		}
		t.Fatalf("no %s after 90 s", firing)
	}
	checkFleetAlerts(t, global, hosts)
	checkFleetPanels(t, edges, global)
	logShipped(t, edges, global, hosts)
}

// fleetRules writes the rule files both tiers load into a directory: the
// edge's as committed, and the global tier's generated with for:
// durations of 10 s instead of minutes, so that the run sees them fire,
// and a drop floor of 100 a second instead of 10,000: how many frames a
// veth's microbursts lose still depends on how the machine schedules the
// two generator CPUs against NAPI, which no rate pins down. Their
// expressions are the
// committed ones otherwise; the floor itself is tested by promtool's
// unit tests (dashboards/rules/tests).
func fleetRules(t *testing.T) string {
	dir := t.TempDir()
	cfg := dashboards.DefaultConfig()
	cfg.Global.HostDrops.For, cfg.Global.FleetWideDrops.For = "10s", "10s"
	cfg.NICDropsWhileIdle.MinDiscards = 100
	files, err := dashboards.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"recording.yml", "alerts.yml"} {
		b, err := os.ReadFile(filepath.Join("..", "dashboards", "rules", f))
		if err != nil {
			t.Fatal(err)
		}
		files["rules/"+f] = b
	}
	for _, f := range []string{"recording.yml", "alerts.yml", "global.yml"} {
		if err := os.WriteFile(filepath.Join(dir, f), files["rules/"+f], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// waitForDuring reports whether expr has samples within d.
func waitForDuring(prom *promtest.Server, expr string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		v, err := prom.Query(context.Background(), expr)
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) > 0 {
			return true
		}
	}
	return false
}

// instances queries expr and returns the instances of its samples ("" for
// a sample without one).
func instances(t *testing.T, prom *promtest.Server, expr string) []string {
	t.Helper()
	v, err := prom.Query(context.Background(), expr)
	if err != nil {
		t.Fatalf("%s: %v", prom.URL, err)
	}
	vec, _ := v.(model.Vector)
	var out []string
	for _, s := range vec {
		out = append(out, string(s.Metric["instance"]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkFleetAlerts: the global tier's host alert fires for the seed's
// host alone, its fleet-wide alert for none.
func checkFleetAlerts(t *testing.T, global *promtest.Server, hosts []fleetHost) {
	t.Helper()
	got := instances(t, global, fmt.Sprintf(`ALERTS{alertname=%q,alertstate="firing"}`, dashboards.AlertFleetHostDrops))
	if !slices.Equal(got, []string{hosts[0].instance}) {
		t.Errorf("%s fires for %v, want the bursting host %s alone", dashboards.AlertFleetHostDrops, got, hosts[0].instance)
	}
	if got := instances(t, global, fmt.Sprintf(`ALERTS{alertname=%q}`, dashboards.AlertFleetWideDrops)); len(got) > 0 {
		t.Errorf("%s is pending or firing with one host of three dropping", dashboards.AlertFleetWideDrops)
	}
	for _, q := range []string{"instance_device:xdp_nic_rx_host_drops_while_rx_idle:rate1m", "instance:xdp_rx_cpus_idle:avg_ratio"} {
		v, err := global.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("at the global tier: %v", v)
	}
}

// checkFleetPanels evaluates every fleet-view query and every global
// rule's expression at each edge (where the recorded series are too) and
// at the global tier: one with data at an edge has data for the same
// instances at the global tier (remote write lags a second or two, so it
// is asked again for up to 20 s).
func checkFleetPanels(t *testing.T, edges []*promtest.Server, global *promtest.Server) {
	t.Helper()
	vars := dashboards.Vars{Instance: ".+", Device: ".*", RateInterval: 4 * time.Second}
	type query struct{ what, expr string }
	var queries []query
	for _, q := range dashboards.Queries() {
		if q.UID == "xdp-fleet-view" {
			queries = append(queries, query{q.Panel + " [" + q.RefID + "]", q.Expand(vars)})
		}
	}
	for _, g := range dashboards.GlobalRules(dashboards.DefaultConfig()).Groups {
		for _, r := range g.Rules {
			queries = append(queries, query{"global rule " + r.Record + r.Alert, r.Expr})
		}
	}
	missing := func(want, got []string) bool {
		return slices.ContainsFunc(want, func(i string) bool { return !slices.Contains(got, i) })
	}
	with := 0
	for _, q := range queries {
		var want []string
		for _, e := range edges {
			want = append(want, instances(t, e, q.expr)...)
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if len(want) == 0 {
			t.Logf("no data at the edges either: %s", q.what)
			continue
		}
		with++
		var got []string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Second) {
			if got = instances(t, global, q.expr); !missing(want, got) || time.Now().After(deadline) {
				break
			}
		}
		if missing(want, got) {
			t.Errorf("%s: the edges have data for %v, the global tier for %v:\n%s", q.what, want, got, q.expr)
		}
	}
	if with < 10 {
		t.Errorf("only %d fleet-view queries and global rules have data at the edges", with)
	}
	t.Logf("%d of %d fleet-view queries and global rules have data at the edges, and at the global tier", with, len(queries))
}

// logShipped reports the series each host ships and what the edges'
// remote write sends per second and per host.
func logShipped(t *testing.T, edges []*promtest.Server, global *promtest.Server, hosts []fleetHost) {
	t.Helper()
	for _, h := range hosts {
		n, err := global.Scalar(context.Background(), fmt.Sprintf(`count({instance=%q,__name__!~".*_while_rx_idle:.*"})`, h.instance))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("host %s ships %.0f series", h.instance, n)
	}
	for i, e := range edges {
		samples, bytes, err := e.RemoteWritten(10 * time.Second)
		if err != nil {
			t.Errorf("edge %d: %v", i, err)
		}
		t.Logf("edge %d (%d hosts, 1 s scrapes): remote write %.0f samples/s, %.0f bytes/s", i, 2-i, samples, bytes)
	}
}
