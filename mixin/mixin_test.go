// Package mixin tests the monitoring mixin (mixin.libsonnet) with
// go-jsonnet, the Go implementation of Jsonnet.
package mixin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
	"go.yaml.in/yaml/v3"
)

// evaluate renders the mixin, with jsonnet overrides appended, to JSON.
func evaluate(t *testing.T, override string) map[string]any {
	t.Helper()
	vm := jsonnet.MakeVM()
	out, err := vm.EvaluateAnonymousSnippet("test.jsonnet", `local m = (import 'mixin.libsonnet') `+override+`;
{ alerts: m.prometheusAlerts, rules: m.prometheusRules, dashboards: m.grafanaDashboards,
  alertmanager: m.alertmanagerConfig, templates: m.alertmanagerTemplates }`)
	if err != nil {
		t.Fatalf("jsonnet: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// generated reads a file the generator wrote for dashboards/ as JSON
// values, to compare with the mixin's.
func generated(t *testing.T, name string) any {
	t.Helper()
	return generatedAt(t, filepath.Join("..", "dashboards", name))
}

// generatedAt reads a generated file at path as JSON values.
func generatedAt(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if strings.HasSuffix(name, ".json") {
		err = json.Unmarshal(b, &v)
	} else {
		err = yaml.Unmarshal(b, &v)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// Through JSON, as the mixin's values come.
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(j, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMixinIsTheGeneratedFiles renders the mixin with its defaults and
// holds its fields to dashboards/'s generated rules and dashboards.
func TestMixinIsTheGeneratedFiles(t *testing.T) {
	m := evaluate(t, "")
	for field, file := range map[string]string{"alerts": "rules/alerts.yml", "rules": "rules/recording.yml"} {
		if !reflect.DeepEqual(m[field], generated(t, file)) {
			t.Errorf("the mixin's %s differ from dashboards/%s", field, file)
		}
	}
	boards, _ := m["dashboards"].(map[string]any)
	for _, name := range []string{"xdp-run-view.json", "xdp-fleet-view.json"} {
		if !reflect.DeepEqual(boards[name], generated(t, name)) {
			t.Errorf("the mixin's dashboard %s differs from dashboards/%s", name, name)
		}
	}
	if len(boards) != 2 {
		t.Errorf("the mixin has %d dashboards, want the run view and the fleet view", len(boards))
	}
	if !reflect.DeepEqual(m["alertmanager"], generatedAt(t, "../deploy/alertmanager/alertmanager.yml")) {
		t.Error("the mixin's alertmanagerConfig differs from deploy/alertmanager/alertmanager.yml")
	}
	tmpl, err := os.ReadFile("../deploy/alertmanager/xdp.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if templates, _ := m["templates"].(map[string]any); templates["xdp.tmpl"] != string(tmpl) {
		t.Error("the mixin's alertmanagerTemplates differ from deploy/alertmanager/xdp.tmpl")
	}
}

// TestMixinSelector overrides _config.selector: every rule's expression
// that selected with the default selects with the new one.
func TestMixinSelector(t *testing.T) {
	m := evaluate(t, `+ { _config+:: { selector: 'job="node-xdp"' } }`)
	b, err := json.Marshal([]any{m["alerts"], m["rules"]})
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if strings.Contains(text, `job=\"xdp\"`) {
		t.Error("the default selector is left in a rule")
	}
	if n := strings.Count(text, `job=\"node-xdp\"`); n < 10 {
		t.Errorf("the new selector appears %d times in the rules", n)
	}
}

// TestMixinGlobalTier: with _config.tier 'global' the mixin's rules are
// dashboards/rules/global.yml's, the roll-ups and the fleet alerts, with
// the selector overridden there too; any other tier is an error.
func TestMixinGlobalTier(t *testing.T) {
	m := evaluate(t, `+ { _config+:: { tier: 'global' } }`)
	want, _ := generated(t, "rules/global.yml").(map[string]any)
	groups, _ := want["groups"].([]any)
	if len(groups) != 2 {
		t.Fatalf("global.yml has %d groups, want the roll-ups and the alerts", len(groups))
	}
	for field, group := range map[string]any{"rules": groups[0], "alerts": groups[1]} {
		if got := m[field]; !reflect.DeepEqual(got, map[string]any{"groups": []any{group}}) {
			t.Errorf("the global tier's %s differ from global.yml's group", field)
		}
	}
	sel := evaluate(t, `+ { _config+:: { tier: 'global', selector: 'job="node-xdp"' } }`)
	if b, _ := json.Marshal(sel); !strings.Contains(string(b), `job=\"node-xdp\"`) || strings.Contains(string(b), `job=\"xdp\"`) {
		t.Error("the selector is not replaced in the global tier's rules")
	}
	vm := jsonnet.MakeVM()
	if _, err := vm.EvaluateAnonymousSnippet("bad.jsonnet", `((import 'mixin.libsonnet') + { _config+:: { tier: 'cluster' } }).prometheusRules`); err == nil ||
		!strings.Contains(err.Error(), "_config.tier must be") {
		t.Errorf("tier 'cluster': %v, want the tier error", err)
	}
}
