// Command gen writes the dashboards and rule files of package dashboards.
//
//	go run ./dashboards/cmd/gen -out dashboards -packages .      # the committed files
//	go run ./dashboards/cmd/gen -config my-thresholds.yaml -out /tmp/xdp   # your thresholds
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/xdp-exporter/xdp_exporter/dashboards"
)

func main() {
	config := flag.String("config", "", "YAML file overriding thresholds of dashboards.DefaultConfig (see dashboards/config.go)")
	out := flag.String("out", ".", "directory to write the dashboards (*.json) and rules (rules/*.yml) to")
	docs := flag.String("docs", "", "docs/panels.md to rewrite the per-panel section of")
	packages := flag.String("packages", "", "repository root to write the Helm chart's and the mixin's copies of the rules and dashboards, and the fleet's example Prometheus configurations (deploy/prometheus/edge.yml, global.yml), under")
	flag.Parse()
	if err := run(*config, *out, *docs, *packages); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(config, out, docs, packages string) error {
	cfg := dashboards.DefaultConfig()
	if config != "" {
		var err error
		if cfg, err = dashboards.LoadConfig(config); err != nil {
			return err
		}
	}
	files, err := dashboards.Generate(cfg)
	if err != nil {
		return err
	}
	if err := write(out, files); err != nil {
		return err
	}
	if packages != "" {
		if err := write(packages, dashboards.Packaged(files)); err != nil {
			return err
		}
		deploy, err := dashboards.Deploy(cfg)
		if err != nil {
			return err
		}
		if err := write(packages, deploy); err != nil {
			return err
		}
	}
	if docs == "" {
		return nil
	}
	doc, err := os.ReadFile(docs)
	if err != nil {
		return err
	}
	updated, err := dashboards.WithPanelDocs(string(doc))
	if err != nil {
		return fmt.Errorf("%s: %w", docs, err)
	}
	return os.WriteFile(docs, []byte(updated), 0o644)
}

// write writes files under dir, in name order.
func write(dir string, files map[string][]byte) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}
