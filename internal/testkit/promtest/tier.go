package promtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// Placement is what a test changes in one of the fleet's example
// configurations (deploy/prometheus/edge.yml, global.yml) to run it: the
// rest, the remote write's keep rule and the instance relabeling
// included, is run as users get it.
type Placement struct {
	// Targets replace the first scrape job's targets.
	Targets []string
	// Interval is the scrape and evaluation interval (and scrape timeout).
	Interval time.Duration
	// RuleDir replaces /etc/prometheus/xdp in the rule files' paths.
	RuleDir string
	// ExternalLabels replace the configuration's.
	ExternalLabels map[string]string
	// WriteURL replaces the first remote write's URL.
	WriteURL string
	// Alertmanager (host:port) replaces the Alertmanager the alerts are
	// sent to; empty, they are sent to none.
	Alertmanager string
}

// Place writes the configuration at path with p applied into a
// directory of the test's, and returns the new file's path.
func Place(t testing.TB, path string, p Placement) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	global, _ := cfg["global"].(map[string]any)
	if global == nil {
		global = map[string]any{}
		cfg["global"] = global
	}
	global["scrape_interval"], global["evaluation_interval"], global["scrape_timeout"] = p.Interval.String(), p.Interval.String(), p.Interval.String()
	if p.ExternalLabels != nil {
		global["external_labels"] = p.ExternalLabels
	}
	if files, ok := cfg["rule_files"].([]any); ok {
		for i, f := range files {
			files[i] = strings.Replace(f.(string), "/etc/prometheus/xdp", p.RuleDir, 1)
		}
	}
	if jobs, ok := cfg["scrape_configs"].([]any); ok && p.Targets != nil {
		jobs[0].(map[string]any)["static_configs"] = []map[string]any{{"targets": p.Targets}}
	}
	if writes, ok := cfg["remote_write"].([]any); ok {
		w := writes[0].(map[string]any)
		w["url"] = p.WriteURL
		// Send within a second, not the default 5 s: the test waits for it.
		w["queue_config"] = map[string]any{"batch_send_deadline": "1s"}
	}
	if p.Alertmanager == "" {
		delete(cfg, "alerting")
	} else {
		cfg["alerting"] = map[string]any{"alertmanagers": []map[string]any{{"static_configs": []map[string]any{{"targets": []string{p.Alertmanager}}}}}}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	placed := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(placed, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return placed
}
