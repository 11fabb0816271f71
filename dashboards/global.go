package dashboards

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// A fleet larger than one Prometheus holds (about 5,900 series a host
// with the default collectors) runs Prometheus per cluster or rack, the
// edge, and remote-writes to a horizontally scaled store (Thanos Receive,
// Grafana Mimir, Cortex, VictoriaMetrics). The rules come in two tiers:
// the edge evaluates rules/recording.yml and rules/alerts.yml where the
// raw series are; the global store evaluates rules/global.yml over what
// the edge ships (Shipped): the per-host and per-device recorded series
// the fleet view reads, up, ALERTS and a few small families, nothing per
// CPU or per queue. docs/scaling.md has the figures.

// Alert names of the global tier, also runbook section titles.
const (
	AlertFleetHostDrops        = "XDPFleetHostDropsWhileRXCPUsIdle"
	AlertFleetWideDrops        = "XDPFleetWideDrops"
	AlertFleetCollectorFailing = "XDPFleetCollectorFailing"
	AlertFleetHostSilent       = "XDPFleetHostSilent"
)

// Names the global tier records.
func (r recorded) deviceDropsWhileIdle() string {
	return r.rate("instance_device", "xdp_nic_rx_host_drops_while_rx_idle")
}
func (r recorded) fleetXDP() string       { return r.rate("job", "xdp_processed_packets") }
func (r recorded) fleetPortRx() string    { return r.rate("job", "xdp_nic_port_rx_packets") }
func (r recorded) fleetHostDrops() string { return r.rate("job_where", "xdp_nic_rx_host_drops") }
func (r recorded) fleetHosts() string     { return "job:xdp_hosts:count" }
func (r recorded) fleetDropping() string  { return "job:xdp_hosts_dropping_while_rx_idle:count" }
func (r recorded) collectorHosts() string { return "job_collector:xdp_scrape_collector_hosts:count" }
func (r recorded) collectorFailing() string {
	return "job_collector:xdp_scrape_collector_failing_hosts:count"
}

// GlobalRules are the global tier's rules: fleet roll-ups of the edge's
// recorded series, and the alerts that compare a host with its fleet or
// watch the fleet as a whole. None reads a per-CPU or per-queue series.
func GlobalRules(cfg Config) RuleFile {
	return RuleFile{Groups: []RuleGroup{
		{Name: "xdp_exporter.global.recording", Rules: globalRecordingRules(cfg)},
		{Name: "xdp_exporter.global.alerts", Rules: globalAlerts(cfg)},
	}}
}

func globalRecordingRules(cfg Config) []Rule {
	r := recorded{cfg.RateWindow}
	h, fl, sel := cfg.hostLabels(), cfg.fleetLabels(), cfg.Selector
	d := cfg.NICDropsWhileIdle
	drops := "sum by (" + h + ", device) (" + r.hostDrops() + ")"
	port := "sum by (" + h + ", device) (" + r.portRx() + ")"
	// The edge alert's condition, per device, from the recorded series:
	// a device with no port counter (veth, virtio_net) has no ratio.
	signature := "(\n  " + drops + " > " + num(d.MinDiscards) +
		"\n  and\n  (" + drops + " / on (" + h + ", device) " + port + " > " + num(d.MinRatio) +
		"\n  or " + drops + " unless on (" + h + ", device) " + port + ")\n)\nand on (" + h + ")\n" + r.rxIdle() + " > " + num(d.MinIdleRatio)
	success := withSelector("xdp_scrape_collector_success", sel)
	return []Rule{
		record(r.deviceDropsWhileIdle(), signature),
		record(r.fleetHosts(), "count by ("+fl+") ("+withSelector("up", sel)+")"),
		record(r.fleetDropping(), "count by ("+fl+") (group by ("+h+") ("+r.deviceDropsWhileIdle()+"))"),
		record(r.fleetXDP(), "sum by ("+fl+") ("+r.hostXDP()+")"),
		record(r.fleetPortRx(), "sum by ("+fl+") ("+r.hostPortRx()+")"),
		record(r.fleetHostDrops(), "sum by ("+fl+", where) ("+r.hostHostDrops()+")"),
		record(r.collectorHosts(), "count by ("+fl+", collector) ("+success+")"),
		record(r.collectorFailing(), "count by ("+fl+", collector) ("+success+" == 0)"),
	}
}

func globalAlerts(cfg Config) []Rule {
	r := recorded{cfg.RateWindow}
	h, fl, sel := cfg.hostLabels(), cfg.fleetLabels(), cfg.Selector
	alert := cfg.alertRule
	// part of whole, both counts of hosts by the labels on.
	share := func(part, whole, on string, s FleetShareConfig) string {
		return part + " / on (" + on + ") " + whole + " >= " + num(s.MinShare) + "\nand on (" + on + ")\n" + part + " >= " + strconv.Itoa(s.MinHosts)
	}
	// An annotation's query of the alert's fleet.
	fleetSel, fleetArgs := "job='%s'", "$labels.job"
	if cfg.ClusterLabel != "" {
		fleetSel, fleetArgs = cfg.ClusterLabel+"='%s',"+fleetSel, "$labels."+cfg.ClusterLabel+" "+fleetArgs
	}
	count := func(series string) string {
		return queryValue(series+"{"+fleetSel+"}", fleetArgs, `printf "%.0f"`)
	}
	g := cfg.Global
	fleetWide := share(r.fleetDropping(), r.fleetHosts(), fl, g.FleetWideDrops)
	// The edge's own alert for the device, firing (ALERTS is shipped):
	// where it reaches Alertmanager it has said this already. Without it
	// in the expression, the global alert, a few seconds behind the
	// edge's at every step, would fire alone for those seconds when the
	// edge's resolves, and notify.
	edgeFiring := withSelector(`ALERTS{alertname="`+AlertNICDropsWhileIdle+`",alertstate="firing"}`, sel)
	fleetAlert := alert(AlertFleetWideDrops, fleetWide,
		g.FleetWideDrops.For, g.FleetWideDrops.Severity,
		"{{ $value | humanizePercentage }} of the hosts of {{ $labels.job }} drop packets for lack of host resources while their RX CPUs idle",
		count(r.fleetDropping())+
			" of the job's "+count(r.fleetHosts())+" hosts show the XDPNICDropsWhileRXCPUsIdle signature at once: "+
			"a fleet-wide cause (a traffic burst upstream, a change rolled out everywhere) rather than one host's hardware.")
	// It inhibits the hosts' alerts: as the incident ends their drops stop
	// a few seconds apart, and without this the last host's alert would
	// notify in between.
	fleetAlert.KeepFiringFor = g.FleetWideDrops.KeepFiringFor
	alerts := []Rule{
		alert(AlertFleetHostDrops,
			r.deviceDropsWhileIdle()+"\nunless on ("+fl+")\n("+fleetWide+")\nunless on ("+h+", device)\n"+edgeFiring,
			g.HostDrops.For, g.HostDrops.Severity,
			"{{ $labels.device }} on {{ $labels.instance }} drops packets for lack of host resources while its RX CPUs are idle, unlike its fleet",
			"{{ $value | humanize }} packets/s dropped for lack of host resources while the host's RX CPUs are "+
				queryValue(r.rxIdle()+`{instance='%s'}`, "$labels.instance", "humanizePercentage")+" idle; "+
				count(r.fleetDropping())+" of the job's "+count(r.fleetHosts())+
				" hosts do: this host's PCIe, memory or DDIO, not the traffic, is the limit."),
		fleetAlert,
		alert(AlertFleetCollectorFailing, share(r.collectorFailing(), r.collectorHosts(), fl+", collector", g.CollectorFailing),
			g.CollectorFailing.For, g.CollectorFailing.Severity,
			"The {{ $labels.collector }} collector fails on {{ $value | humanizePercentage }} of the hosts of {{ $labels.job }}",
			"A collector failing on many hosts at once is a release's or a rollout's fault (a kernel, a capability, a flag), not a host's: "+
				queryValue(r.collectorFailing()+"{"+fleetSel+",collector='%s'}", fleetArgs+" $labels.collector", `printf "%.0f"`)+" of "+
				queryValue(r.collectorHosts()+"{"+fleetSel+",collector='%s'}", fleetArgs+" $labels.collector", `printf "%.0f"`)+" hosts."),
		alert(AlertFleetHostSilent,
			"group by ("+h+") (max_over_time("+withSelector("up", sel)+"["+g.HostSilent.Window+"]))\nunless on ("+h+")\n"+withSelector("up", sel),
			g.HostSilent.For, g.HostSilent.Severity,
			"{{ $labels.instance }} no longer reaches the global tier",
			"The global store received up for {{ $labels.instance }} within the last "+g.HostSilent.Window+" and receives none now: "+
				"its edge Prometheus is down or its remote write fails (prometheus_remote_storage_samples_failed_total at the edge). Edge alerts keep firing there."),
	}
	return alerts
}

// Shipped is what the global tier needs from the edge, by series name:
// what the fleet view's panels and variables and the global rules read
// (recorded series of the edge, small families), and up and ALERTS. The
// global rules' own records are computed there, not shipped.
func Shipped(cfg Config) []string {
	global := map[string]bool{}
	var exprs []string
	for _, g := range GlobalRules(cfg).Groups {
		for _, r := range g.Rules {
			global[r.Record] = true
			exprs = append(exprs, r.Expr)
			exprs = append(exprs, r.Annotations["summary"], r.Annotations["description"])
		}
	}
	exprs = append(exprs, fleetExprs(cfg)...)
	names := map[string]bool{"up": true, "ALERTS": true}
	for _, e := range exprs {
		for _, n := range seriesRef.FindAllString(e, -1) {
			if !global[n] {
				names[n] = true
			}
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// fleetExprs are the fleet view's panel queries and variable queries.
func fleetExprs(cfg Config) []string {
	b := fleetBoard(cfg)
	var out []string
	for _, r := range b.rows {
		for _, p := range r.panels {
			for _, t := range p.targets {
				out = append(out, t.expr)
			}
		}
	}
	for _, v := range variableQueries(b) {
		out = append(out, v.query)
	}
	return out
}

// jobPattern is the job the rules' selector picks, as a regular
// expression: "xdp" for job="xdp", "xdp.*" for job=~"xdp.*"; any job where the selector names
// none.
func jobPattern(cfg Config) (string, error) {
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector("{" + cfg.Selector + "}")
	if err != nil {
		return "", fmt.Errorf("selector %q: %w", cfg.Selector, err)
	}
	for _, m := range ms {
		if m.Name != "job" {
			continue
		}
		switch m.Type {
		case labels.MatchEqual:
			return regexp.QuoteMeta(m.Value), nil
		case labels.MatchRegexp:
			return m.Value, nil
		}
	}
	return ".*", nil
}

// KeepRegex is the write_relabel_configs keep rule's regex over
// __name__, job and alertname joined by ";": the shipped series of the
// selected jobs, and the XDP alerts (ALERTS of XDPExporterDown's absent()
// case carries no job).
func KeepRegex(cfg Config) (string, error) {
	job, err := jobPattern(cfg)
	if err != nil {
		return "", err
	}
	var names []string
	for _, n := range Shipped(cfg) {
		if n != "ALERTS" {
			names = append(names, n)
		}
	}
	return "(?:" + strings.Join(names, "|") + ");(?:" + job + ");|ALERTS;.*;XDP.*", nil
}
