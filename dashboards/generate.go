package dashboards

import (
	"encoding/json"
	"fmt"
)

func boards(cfg Config) []board {
	return []board{paperBoard(), runBoard(), fleetBoard(cfg)}
}

// Generate renders every generated file, keyed by its path relative to
// the dashboards directory: the three dashboards and the two rule files.
func Generate(cfg Config) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, b := range boards(cfg) {
		d, err := build(b)
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", b.uid, err)
		}
		j, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", b.uid, err)
		}
		out[b.file] = append(j, '\n')
	}
	rec, err := marshalRules(RecordingRules(cfg))
	if err != nil {
		return nil, err
	}
	out["rules/recording.yml"] = rec
	alerts, err := marshalRules(AlertingRules(cfg))
	if err != nil {
		return nil, err
	}
	out["rules/alerts.yml"] = alerts
	return out, nil
}
