package dashboards

import (
	"encoding/json"
	"fmt"
)

func boards(cfg Config) []board {
	bs := []board{paperBoard(), runBoard(cfg), fleetBoard(cfg)}
	for i := range bs {
		bs[i].runbookURL = cfg.RunbookURL
	}
	return bs
}

// Generate renders every generated file, keyed by its path relative to
// the dashboards directory: the three dashboards and the two rule files.
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
