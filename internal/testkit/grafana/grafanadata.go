package grafana

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// jsDir holds grafana.cjs and its pinned @grafana/data and @grafana/schema
// (package-lock.json), which make deps installs (npm ci).
func jsDir() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "js")
}

// node runs grafana.cjs on req and decodes its answer into out. Without
// Node.js or the installed packages the test cannot hold the dashboards
// to Grafana's code: it is skipped, or fails where capabilities are
// required (CI).
func node(t testing.TB, req, out any) error {
	t.Helper()
	dir := jsDir()
	bin, err := exec.LookPath("node")
	if err != nil {
		testenv.Unavailable(t, "node not installed (apt-get install nodejs npm; make deps)")
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grafana", "data")); err != nil {
		testenv.Unavailable(t, "@grafana/data not installed in %s (make deps runs npm ci there)", dir)
		return err
	}
	in, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, filepath.Join(dir, "grafana.cjs"))
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var failed struct{ Error string }
	if json.Unmarshal(stdout.Bytes(), &failed) == nil && failed.Error != "" {
		return errors.New(failed.Error)
	}
	if runErr != nil {
		return fmt.Errorf("grafana.cjs: %v\n%s", runErr, stderr.Bytes())
	}
	return json.Unmarshal(stdout.Bytes(), out)
}

// The keys under which a panel's field matchers are evaluated.
func overrideKey(i int) string { return fmt.Sprintf("override.%d", i) }
func seriesKey(i int, axis string) string {
	return fmt.Sprintf("series.%d.%s", i, axis)
}

// matchers are the panel's field matchers: its overrides', and its
// xychart series' x and y.
func (p *Panel) matchers() map[string]Matcher {
	out := map[string]Matcher{}
	for i, o := range p.FieldConfig.Overrides {
		out[overrideKey(i)] = o.Matcher
	}
	for i, s := range p.Options.Series {
		if s.X != nil {
			out[seriesKey(i, "x")] = s.X.Matcher
		}
		if s.Y != nil {
			out[seriesKey(i, "y")] = s.Y.Matcher
		}
	}
	return out
}

// wireField is a field as grafana.cjs reads (toDataFrame's DataFrameDTO)
// and writes it.
type wireField struct {
	Name        string            `json:"name"`
	Type        FieldType         `json:"type"`
	Labels      map[string]string `json:"labels,omitempty"`
	Config      map[string]string `json:"config,omitempty"`
	Values      []any             `json:"values"`
	DisplayName string            `json:"displayName,omitempty"`
	Matched     []string          `json:"matched,omitempty"`
}

type wireFrame struct {
	RefID  string      `json:"refId,omitempty"`
	Name   string      `json:"name,omitempty"`
	Fields []wireField `json:"fields"`
}

// Apply is what Grafana does to a panel's frames before the panel draws
// them, by Grafana's own code (@grafana/data): the panel's
// transformations, then each field's display name and which of the
// panel's field matchers select it.
func (p *Panel) Apply(t testing.TB, frames []*Frame) ([]*Frame, error) {
	t.Helper()
	in := make([]wireFrame, len(frames))
	for i, f := range frames {
		in[i] = wireFrame{RefID: f.RefID, Name: f.Name}
		for _, fl := range f.Fields {
			wf := wireField{Name: fl.Name, Type: fl.Type, Labels: fl.Labels, Values: fl.Values}
			if fl.DisplayNameFromDS != "" {
				wf.Config = map[string]string{"displayNameFromDS": fl.DisplayNameFromDS}
			}
			in[i].Fields = append(in[i].Fields, wf)
		}
	}
	req := map[string]any{"panel": map[string]any{"transformations": p.Transformations, "matchers": p.matchers()}, "frames": in}
	var res struct{ Frames []wireFrame }
	if err := node(t, req, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Title, err)
	}
	out := make([]*Frame, len(res.Frames))
	for i, wf := range res.Frames {
		out[i] = &Frame{RefID: wf.RefID, Name: wf.Name}
		for _, f := range wf.Fields {
			field := &Field{Name: f.Name, Type: f.Type, Labels: f.Labels, Values: f.Values, Display: f.DisplayName, Matched: f.Matched}
			if f.Type == TypeTime {
				for j, v := range field.Values {
					if ms, ok := v.(float64); ok {
						field.Values[j] = int64(ms)
					}
				}
			}
			out[i].Fields = append(out[i].Fields, field)
		}
	}
	return out, nil
}

// Overrides is the field config the panel's overrides give f (after
// Apply): the properties of every override whose matcher selects it, a
// later override's winning, as applyFieldOverrides applies them.
func (p *Panel) Overrides(f *Field) map[string]any {
	out := map[string]any{}
	for i, o := range p.FieldConfig.Overrides {
		if slices.Contains(f.Matched, overrideKey(i)) {
			for _, pr := range o.Properties {
				out[pr.ID] = pr.Value
			}
		}
	}
	return out
}

// Schema is what @grafana/schema says of dashboards: the schemaVersion of
// its default dashboard, and by panel type the option names its Options
// type declares.
type Schema struct {
	SchemaVersion int                 `json:"schemaVersion"`
	Options       map[string][]string `json:"options"`
}

// LoadSchema asks @grafana/schema.
func LoadSchema(t testing.TB) (Schema, error) {
	t.Helper()
	var s Schema
	err := node(t, map[string]bool{"schema": true}, &s)
	return s, err
}
