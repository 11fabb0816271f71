package dashboards

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestRulesCheck: promtool finds every generated rule file valid and its
// lint (duplicate rules among them) clean.
func TestRulesCheck(t *testing.T) {
	bin := promtool(t)
	files := slices.Sorted(maps.Keys(ruleFiles(DefaultConfig())))
	out, err := exec.Command(bin, append([]string{"check", "rules", "--lint-fatal"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules --lint-fatal: %v\n%s", err, out)
	}
}

// TestRulesUnit runs the promtool unit tests in rules/tests.
func TestRulesUnit(t *testing.T) {
	bin := promtool(t)
	files, _ := filepath.Glob("rules/tests/*.yml")
	if len(files) == 0 {
		t.Fatal("no rule tests in rules/tests")
	}
	cmd := exec.Command(bin, append([]string{"test", "rules"}, baseNames(files)...)...)
	cmd.Dir = "rules/tests"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

func baseNames(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Base(f)
	}
	return out
}

// TestEveryAlertTestedAndDocumented: each alert has a firing and a quiet
// promtool case and a runbook section its runbook_url points to.
func TestEveryAlertTestedAndDocumented(t *testing.T) {
	type testFile struct {
		Tests []struct {
			Alerts []struct {
				Name   string `yaml:"alertname"`
				Expect []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob("rules/tests/*.yml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf testFile
		if err := yaml.Unmarshal(b, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range tf.Tests {
			for _, a := range tc.Alerts {
				if len(a.Expect) > 0 {
					firing[a.Name] = true
				} else {
					quiet[a.Name] = true
				}
			}
		}
	}
	anchors := runbookSections(t)
	var alerts []Rule
	for _, rf := range []RuleFile{AlertingRules(DefaultConfig()), GlobalRules(DefaultConfig())} {
		for _, g := range rf.Groups {
			alerts = append(alerts, g.Rules...)
		}
	}
	for _, r := range alerts {
		if r.Alert == "" {
			continue
		}
		if !firing[r.Alert] {
			t.Errorf("%s: no firing test case", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no quiet test case", r.Alert)
		}
		url := r.Annotations["runbook_url"]
		anchor := url[strings.LastIndex(url, "#")+1:]
		if !anchors[anchor] {
			t.Errorf("%s: runbook_url %s has no section in docs/runbook.md", r.Alert, url)
		}
		for _, k := range []string{"summary", "description"} {
			if r.Annotations[k] == "" {
				t.Errorf("%s: no %s", r.Alert, k)
			}
		}
	}
}

// TestConfigOverride: a thresholds file changes the rendered rules, and a
// misspelt key is an error rather than a silently kept default.
func TestConfigOverride(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("rss_imbalance:\n  max_over_mean: 1.7\ncollector_failing:\n  ignored_collectors: [perf, napi]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RSSImbalance.MaxOverMean != 1.7 || cfg.RSSImbalance.For != DefaultConfig().RSSImbalance.For {
		t.Errorf("override not merged onto defaults: %+v", cfg.RSSImbalance)
	}
	var rss, coll string
	for _, r := range AlertingRules(cfg).Groups[0].Rules {
		switch r.Alert {
		case AlertRSSImbalance:
			rss = r.Expr
		case AlertCollectorFailing:
			coll = r.Expr
		}
	}
	if !strings.Contains(rss, "1.7 * avg by (cluster, job, instance, device)") {
		t.Errorf("RSS threshold not applied:\n%s", rss)
	}
	if !strings.Contains(coll, `collector!~"perf|napi"`) {
		t.Errorf("ignored collectors not applied:\n%s", coll)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("rss_imbalance:\n  max_over_men: 1.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(bad); err == nil || !strings.Contains(err.Error(), "max_over_men") {
		t.Errorf("LoadConfig(misspelt key) = %v, want an error naming it", err)
	}
	window := filepath.Join(dir, "window.yaml")
	if err := os.WriteFile(window, []byte("lab:\n  rate_window: 4 seconds\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(window); err == nil || !strings.Contains(err.Error(), "lab.rate_window") {
		t.Errorf("LoadConfig(a window PromQL cannot read) = %v, want an error naming it", err)
	}
}

// runbookSections are the anchors of docs/runbook.md's "## Name" sections.
func runbookSections(t *testing.T) map[string]bool {
	t.Helper()
	runbook, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	return anchors
}

// TestAnnotationQueriesSelectIdentity: every query an alert's annotations
// run for one instance selects its cluster and job too, on both tiers: at
// a global tier two clusters may each have a host of the same name
// (rules/tests/global.yml has the case).
func TestAnnotationQueriesSelectIdentity(t *testing.T) {
	cfg := DefaultConfig()
	n := 0
	for _, f := range []RuleFile{AlertingRules(cfg), GlobalRules(cfg)} {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				for key, text := range r.Annotations {
					for _, m := range templateQuery.FindAllStringSubmatch(text, -1) {
						format, args := m[1], strings.Fields(m[2])
						if strings.Count(format, "%s") != len(args) {
							t.Errorf("%s %s: %d %%s for %d arguments: %s", r.Alert, key, strings.Count(format, "%s"), len(args), m[0])
						}
						if c := strings.Count(format, "instance='%s'"); c > 0 {
							n++
							if strings.Count(format, "cluster='%s',job='%s',instance='%s'") != c {
								t.Errorf("%s %s: a query selects an instance without its cluster and job: %s", r.Alert, key, m[0])
							}
						}
					}
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d annotation queries select an instance", n)
	}
}
