package dashboards

import (
	"encoding/json"
	"fmt"
)

func boards(cfg Config) []board {
	bs := []board{paperBoard(cfg), runBoard(cfg), fleetBoard(cfg)}
	for i := range bs {
		bs[i].runbookURL = cfg.RunbookURL
	}
	return bs
}

// Generate renders every generated file, keyed by its path relative to
// the dashboards directory: the three dashboards and the four rule files.
func Generate(cfg Config) (map[string][]byte, error) {
	out := map[string][]byte{}
	bs := boards(cfg)
	for _, b := range bs {
		d, err := build(b, bs)
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", b.uid, err)
		}
		j, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", b.uid, err)
		}
		out[b.file] = append(j, '\n')
	}
	for file, rf := range ruleFiles(cfg) {
		b, err := marshalRules(rf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out[file] = b
	}
	return out, nil
}

// ruleFiles are the rule files, keyed by their path relative to the
// dashboards directory.
func ruleFiles(cfg Config) map[string]RuleFile {
	return map[string]RuleFile{
		"rules/recording.yml": RecordingRules(cfg),
		globalFile:            GlobalRules(cfg),
		"rules/lab.yml":       LabRecordingRules(cfg),
		alertsFile:            AlertingRules(cfg),
	}
}

// packagedFiles are the generated files the Helm chart and the monitoring
// mixin carry: the rules and the dashboards of a production cluster (the
// paper figures and their lab rules belong to the lab).
var packagedFiles = []string{"rules/recording.yml", alertsFile, globalFile, "xdp-run-view.json", "xdp-fleet-view.json"}

// Packaged returns the copies of files (Generate's) that the Helm chart
// (deploy/helm/xdp-exporter/files/) and the monitoring mixin
// (mixin/generated/) hold, keyed by their path relative to the
// repository: both are installed without this repository, so they carry
// the files themselves.
func Packaged(files map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, name := range packagedFiles {
		out["deploy/helm/xdp-exporter/files/"+name] = files[name]
		out["mixin/generated/"+name] = files[name]
	}
	return out
}
