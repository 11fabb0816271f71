package dashboards

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Query is one PromQL expression of one dashboard panel, as it appears in
// the dashboard JSON (with Grafana's $instance, $device and
// $__rate_interval variables; see Expand).
type Query struct {
	Dashboard string // dashboard title
	UID       string // dashboard uid
	Panel     string // panel title
	RefID     string
	Expr      string
	Legend    string
	// Figure is true for the live series of the paper-figure XY charts.
	// Axis ("x" or "y") and Series pair them: the points of a figure are
	// the (x, y) values of the same Series at the same timestamp.
	Figure bool
	Axis   string
	Series string
	// Exempt is why the query cannot return data on the veth lab (it needs
	// hardware the lab lacks); empty when it must return data there.
	Exempt string
	// Needs is what the lab must make happen for the query to return
	// data: its series exist only after an event (an exception, a
	// redirect, a failing collector). Empty for queries with data in any
	// run with traffic.
	Needs string
}

// Queries returns every Prometheus query of the dashboards, in dashboard
// and panel order, with what the generator knows about each (figure axes,
// why the lab cannot fill it). They are the queries the generator writes
// into the dashboard JSON (TestGeneratedFilesCommitted holds the committed
// files to it), so what evaluates them evaluates what Grafana runs.
func Queries() []Query {
	var out []Query
	for _, b := range boards(DefaultConfig()) {
		for _, r := range b.rows {
			for _, p := range r.panels {
				for _, t := range p.targets {
					out = append(out, Query{
						Dashboard: b.title, UID: b.uid, Panel: p.title,
						RefID: t.refID, Expr: t.expr, Legend: t.legend,
						Figure: t.axis != "", Axis: t.axis, Series: t.series,
						Exempt: cmp.Or(t.exempt, p.exempt), Needs: cmp.Or(t.needs, p.needs),
					})
				}
			}
		}
	}
	return out
}

// Exemption is a panel that cannot return data on the veth lab.
type Exemption struct {
	Dashboard, Panel, Reason string
}

// ExemptPanels lists the panels whose every query needs hardware the veth
// lab lacks (mlx5 port, page cache, CQE and PCIe counters; ring
// parameters; hardware perf counters), with the reason.
func ExemptPanels() []Exemption {
	var out []Exemption
	for _, b := range boards(DefaultConfig()) {
		for _, r := range b.rows {
			for _, p := range r.panels {
				if p.exempt != "" {
					out = append(out, Exemption{b.title, p.title, p.exempt})
				}
			}
		}
	}
	return out
}

// Vars are the dashboard variable values a query is evaluated with.
type Vars struct {
	Cluster  string // regex; empty is Grafana's "All" (.*)
	Job      string // regex; empty is "All" (.+)
	Instance string // regex, e.g. "localhost:9435" or ".+"
	Device   string // regex, e.g. "veth0" or ".*"
	// RateInterval replaces $__rate_interval (and, in milliseconds,
	// $__rate_interval_ms); Grafana uses at least four scrape intervals,
	// e.g. "4s" with the lab's 1s scrapes.
	RateInterval time.Duration
}

// Expand substitutes the dashboard variables so the expression can be sent
// to Prometheus directly.
func (q Query) Expand(v Vars) string {
	cluster, job := v.Cluster, v.Job
	if cluster == "" {
		cluster = ".*"
	}
	if job == "" {
		job = ".+"
	}
	return strings.NewReplacer(
		"$__rate_interval_ms", strconv.FormatInt(v.RateInterval.Milliseconds(), 10),
		"$__rate_interval", model.Duration(v.RateInterval).String(),
		"$cluster", cluster, "$job", job,
		"${instance}", v.Instance, "$instance", v.Instance,
		"${device}", v.Device, "$device", v.Device,
	).Replace(q.Expr)
}
