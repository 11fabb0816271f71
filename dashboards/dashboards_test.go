package dashboards

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Unavailable(t, "promtool not installed (apt-get install prometheus)")
	}
	return p
}

// TestGeneratedFilesCommitted: the committed dashboards and rules are what
// the generator writes; run `go generate ./dashboards` after a change.
func TestGeneratedFilesCommitted(t *testing.T) {
	files, err := Generate(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v (run go generate ./dashboards)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output: run go generate ./dashboards", name)
		}
	}
	deploy, err := Deploy(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(deploy, Packaged(files))
	for name, want := range deploy {
		if got, err := os.ReadFile(filepath.Join("..", name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output (%v): run go generate ./dashboards", name, err)
		}
	}
	for _, pattern := range []string{"*.json", "rules/*.yml"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if _, ok := files[m]; !ok {
				t.Errorf("%s is not generated: remove it or add it to the generator", m)
			}
		}
	}
}

// jsonTargets collects panel title -> "refId expr" of every Prometheus
// target in a dashboard JSON.
func jsonTargets(t *testing.T, file string) (exprs []string, titles map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				RefID      string `json:"refId"`
				Expr       string `json:"expr"`
				Datasource struct {
					Type string `json:"type"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"datasource", "instance", "device"} {
		if !vars[v] {
			t.Errorf("%s: no $%s variable", file, v)
		}
	}
	titles = map[string]bool{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		titles[p.Title] = true
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", file, p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.Type == "prometheus" {
				exprs = append(exprs, d.Title+"|"+p.Title+"|"+tg.RefID+"|"+tg.Expr)
			}
		}
	}
	return exprs, titles
}

// maxQueryLength is the longest panel query: longer ones are recorded
// in rules/recording.yml or rules/lab.yml and read from there, so a
// panel's query reads as what it plots.
const maxQueryLength = 300

// TestQueriesShort: no query of the committed JSON is longer than
// maxQueryLength.
func TestQueriesShort(t *testing.T) {
	for _, q := range Queries() {
		if len(q.Expr) > maxQueryLength {
			t.Errorf("%s / %s [%s]: %d characters, more than %d: record what it shares in a rule\n%s",
				q.Dashboard, q.Panel, q.RefID, len(q.Expr), maxQueryLength, q.Expr)
		}
	}
}

// TestPanelsReadRecordedSeries: every series a panel reads is a family of
// the exporter or recorded by one of the rule files, and the docs name
// the rule files each dashboard needs.
func TestPanelsReadRecordedSeries(t *testing.T) {
	src := newSources(DefaultConfig())
	for _, q := range Queries() {
		if _, _, err := src.of(q.Expr); err != nil {
			t.Errorf("%s / %s [%s]: %v", q.Dashboard, q.Panel, q.RefID, err)
		}
	}
	if _, _, err := src.of("instance:xdp_no_such_series:rate1m"); err == nil {
		t.Error("a recorded series no rule records was accepted")
	}
}

// TestFigureSeriesPaired: every live series of a paper figure has exactly
// one x and one y query, so its points can be drawn (and written as CSV).
func TestFigureSeriesPaired(t *testing.T) {
	axes := map[string]string{}
	figures := map[string]bool{}
	for _, q := range Queries() {
		if !q.Figure {
			continue
		}
		figures[q.Panel] = true
		key := q.Panel + "|" + q.Series
		if strings.Contains(axes[key], q.Axis) {
			t.Errorf("%s: two %s queries", key, q.Axis)
		}
		axes[key] += q.Axis
	}
	for k, v := range axes {
		if v != "xy" {
			t.Errorf("%s: axes %q, want one x then one y", k, v)
		}
	}
	for _, want := range []string{"Packet drop performance: Mpps vs cores", "CPU usage vs offered load", "Packet forwarding: Mpps vs cores", "XDP_TX Mpps vs RX queues, by ring size"} {
		if !figures[want] {
			t.Errorf("figure %q has no live series", want)
		}
	}
}

// unexpanded finds a Grafana variable ($name, ${name}); label_replace's
// "$1" is not one.
var unexpanded = regexp.MustCompile(`\$(\{|[A-Za-z_])`)

// TestQueriesValidPromQL has promtool parse every panel query (expanded as
// the end-to-end test expands them) by checking them as recording rules.
func TestQueriesValidPromQL(t *testing.T) {
	bin := promtool(t)
	var rules []Rule
	for i, q := range Queries() {
		rules = append(rules, Rule{Record: "panel_query_" + strconv.Itoa(i),
			Expr: q.Expand(Vars{Instance: ".+", Device: ".*", RateInterval: 4 * time.Second})})
		if unexpanded.MatchString(q.Expand(Vars{Instance: "x", Device: "y", RateInterval: 4 * time.Second})) {
			t.Errorf("%s / %s: unexpanded variable in %s", q.Dashboard, q.Panel, q.Expr)
		}
	}
	b, err := yaml.Marshal(RuleFile{Groups: []RuleGroup{{Name: "panels", Rules: rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "panels.yml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the panel queries: %v\n%s", err, out)
	}
}

// TestExemptionsDocumented: every exempt panel exists and docs/panels.md
// names it.
func TestExemptionsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/panels.md")
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	for _, b := range boards(DefaultConfig()) {
		_, titles := jsonTargets(t, b.file)
		for k := range titles {
			all[b.title+"|"+k] = true
		}
	}
	ex := ExemptPanels()
	if len(ex) == 0 {
		t.Fatal("no exempt panels: the lab cannot fill mlx5 and perf panels")
	}
	for _, e := range ex {
		if !all[e.Dashboard+"|"+e.Panel] {
			t.Errorf("exempt panel %q not in %q", e.Panel, e.Dashboard)
		}
		if !bytes.Contains(doc, []byte(e.Panel)) {
			t.Errorf("docs/panels.md does not mention exempt panel %q", e.Panel)
		}
	}
}

func TestExpand(t *testing.T) {
	q := Query{Expr: `sum(rate(x{instance=~"$instance",device=~"$device"}[$__rate_interval]))`}
	got := q.Expand(Vars{Instance: "h:1", Device: "veth0", RateInterval: 4 * time.Second})
	if want := `sum(rate(x{instance=~"h:1",device=~"veth0"}[4s]))`; got != want {
		t.Errorf("Expand = %s, want %s", got, want)
	}
}

// TestPanelDocsCommitted: docs/panels.md has a paragraph for every
// panel, as the generator writes it (go generate ./dashboards).
func TestPanelDocsCommitted(t *testing.T) {
	doc, err := os.ReadFile("../docs/panels.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := WithPanelDocs(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(doc) {
		t.Error("docs/panels.md's panel section differs from the generator's: run go generate ./dashboards")
	}
	for _, b := range boards(DefaultConfig()) {
		for _, r := range b.rows {
			for _, p := range r.panels {
				if !strings.Contains(string(doc), "**"+p.title+".**") {
					t.Errorf("no paragraph for %s / %s", b.title, p.title)
				}
			}
		}
	}
}
