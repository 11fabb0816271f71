// Command gen writes the dashboards and rule files of package dashboards.
//
//	go run ./dashboards/cmd/gen -out dashboards                  # the committed files
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
	flag.Parse()
	if err := run(*config, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(config, out string) error {
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
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(out, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}
