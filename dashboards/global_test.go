package dashboards

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/xdp-exporter/xdp_exporter/collector"
)

// readsAtGlobal is every series the global tier reads, by where it is
// read (a fleet view panel or variable, a global rule or its annotation's
// query), each as the name;job;alertname string the keep rule sees. Parsed
// with Prometheus' own PromQL parser, not with Shipped's pattern, so a
// name Shipped misses shows here.
func readsAtGlobal(t *testing.T, cfg Config) map[string][]string {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	reads := map[string][]string{}
	visit := func(where, expr string) {
		e, err := p.ParseExpr(expr)
		if err != nil {
			t.Fatalf("%s: %v\n%s", where, err, expr)
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			names := []string{vs.Name}
			alertname := ""
			for _, m := range vs.LabelMatchers {
				switch {
				case m.Name == labels.MetricName && m.Type == labels.MatchRegexp:
					names = strings.Split(m.Value, "|")
				case m.Name == "alertname":
					alertname = "XDPAny"
				}
			}
			for _, n := range names {
				if n != "" {
					reads[where] = append(reads[where], n+";xdp;"+alertname)
				}
			}
			return nil
		})
	}
	vars := Vars{Instance: ".+", Device: ".*", RateInterval: time.Minute}
	b := fleetBoard(cfg)
	for _, r := range b.rows {
		for _, pn := range r.panels {
			for _, tg := range pn.targets {
				visit("fleet view / "+pn.title, Query{Expr: tg.expr}.Expand(vars))
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), \w+\)$`)
	for _, v := range variableQueries(b) {
		m := labelValues.FindStringSubmatch(v.query)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(selector, label)", v.name, v.query)
		}
		visit("fleet view variable "+v.name, Query{Expr: m[1]}.Expand(vars))
	}
	// A template's query: printf "EXPR{instance='%s'}" $labels.instance.
	templateQuery := regexp.MustCompile(`printf "([^"]+)"`)
	global := GlobalRules(cfg)
	for _, g := range global.Groups {
		for _, r := range g.Rules {
			visit("global rule "+r.Record+r.Alert, r.Expr)
			for _, k := range []string{"summary", "description"} {
				for _, m := range templateQuery.FindAllStringSubmatch(r.Annotations[k], -1) {
					if !strings.HasPrefix(m[1], "%") {
						visit("global rule "+r.Alert+" "+k, strings.ReplaceAll(m[1], "%s", "x"))
					}
				}
			}
		}
	}
	// What the global tier records itself is not shipped.
	for where, rs := range reads {
		reads[where] = slices.DeleteFunc(rs, func(s string) bool {
			name := s[:strings.IndexByte(s, ';')]
			for _, g := range global.Groups {
				for _, r := range g.Rules {
					if r.Record == name {
						return true
					}
				}
			}
			return false
		})
	}
	return reads
}

// unshipped lists what the global tier reads and keep drops.
func unshipped(reads map[string][]string, keep string) []string {
	re := regexp.MustCompile("^(?:" + keep + ")$")
	var out []string
	for where, rs := range reads {
		for _, s := range rs {
			if !re.MatchString(s) {
				out = append(out, fmt.Sprintf("%s reads %s", where, s[:strings.IndexByte(s, ';')]))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestShippedCoversGlobalTier: the keep rule of the edge's remote write
// keeps every series the fleet view and the global rules read, and none
// of them is a raw per-CPU or per-queue family.
func TestShippedCoversGlobalTier(t *testing.T) {
	cfg := DefaultConfig()
	keep, err := KeepRegex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reads := readsAtGlobal(t, cfg)
	if len(reads) < 20 {
		t.Fatalf("only %d panels and rules read series: the walk missed some", len(reads))
	}
	for _, u := range unshipped(reads, keep) {
		t.Errorf("the relabel list drops what the global tier needs: %s", u)
	}
	families := map[string][]string{}
	for _, f := range collector.Catalogue() {
		families[f.Name] = f.Labels
	}
	perCPUOrQueue := func(labels []string) bool {
		return slices.Contains(labels, "cpu") || slices.Contains(labels, "queue")
	}
	for _, n := range Shipped(cfg) {
		level, _, recorded := strings.Cut(n, ":")
		if recorded && perCPUOrQueue(strings.Split(level, "_")) || perCPUOrQueue(families[n]) {
			t.Errorf("%s is shipped: per CPU or per queue", n)
		}
	}
}

// TestShippedDropCaught: a keep rule without one of the names the fleet
// view reads fails the check, naming the panel.
func TestShippedDropCaught(t *testing.T) {
	cfg := DefaultConfig()
	r := recorded{cfg.RateWindow}
	var names []string
	for _, n := range Shipped(cfg) {
		if n != r.rxIdle() && n != "ALERTS" {
			names = append(names, n)
		}
	}
	keep := "(?:" + strings.Join(names, "|") + ");(?:xdp.*);|ALERTS;.*;XDP.*"
	got := unshipped(readsAtGlobal(t, cfg), keep)
	want := []string{
		"fleet view / RX CPU idle per host (least idle 20) reads " + r.rxIdle(),
		"global rule " + AlertFleetHostDrops + " description reads " + r.rxIdle(),
		"global rule " + r.deviceDropsWhileIdle() + " reads " + r.rxIdle(),
	}
	if !slices.Equal(got, want) {
		t.Errorf("without %s the check says\n%s\nwant\n%s", r.rxIdle(), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
