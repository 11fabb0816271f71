// Package support is what the kernel matrix measured on each kernel: what
// the default exporter reported per collector, tracepoint and netdev
// command, recorded in kernelmatrix/testdata/support.json by a matrix run
// (make generate RECORD=1) and rendered into docs/kernels.md (make
// generate).
package support

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/internal/mdsection"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/vm"
)

// Support is what the default exporter reported on one kernel.
type Support struct {
	Kernel string `json:"kernel"`
	// Collectors maps each default collector to "works" or
	// "unsupported: REASON" (the reason it logged once at INFO).
	Collectors map[string]string `json:"collectors"`
	// Tracepoints maps "collector group:name" to whether the collector's
	// program on it attached.
	Tracepoints map[string]bool `json:"tracepoints"`
	// Commands maps "collector command" to the hint a collector logged
	// once at INFO for a part of its source this kernel lacks (the netdev
	// family's commands).
	Commands map[string]string `json:"commands"`
}

// The generated part of docs/kernels.md lies between these lines.
const (
	tableBegin = "<!-- kernel-support:begin: generated from kernelmatrix/testdata/support.json by make generate, do not edit -->"
	tableEnd   = "<!-- kernel-support:end -->"
)

// Load reads a recording: Support by kernel series.
func Load(path string) (map[string]Support, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out map[string]Support
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Save writes a recording.
func Save(path string, results map[string]Support) error {
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Rewrite is doc with the text between its support table's markers
// replaced by the table of results.
func Rewrite(doc string, results map[string]Support) (string, error) {
	return mdsection.Replace(doc, tableBegin+"\n", tableEnd, Table(results))
}

// Table renders what the default exporter reported on each kernel
// series: a row per collector, a row per tracepoint program, and a row per
// netdev command that some kernel lacks.
func Table(results map[string]Support) string {
	var b strings.Builder
	b.WriteString("| collector or part |")
	for _, s := range vm.Suites {
		fmt.Fprintf(&b, " %s (%s) |", s.Key(), s.Name)
	}
	b.WriteString("\n|---|")
	for range vm.Suites {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	collectors, tracepoints, commands := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range results {
		for c := range r.Collectors {
			collectors[c] = true
		}
		for tp := range r.Tracepoints {
			tracepoints[tp] = true
		}
		for cmd := range r.Commands {
			commands[cmd] = true
		}
	}
	for _, c := range sortedKeys(collectors) {
		fmt.Fprintf(&b, "| %s |", c)
		for _, s := range vm.Suites {
			state, ok := results[s.Key()].Collectors[c]
			if !ok {
				state = "not built"
			}
			state = strings.TrimPrefix(state, "unsupported: "+errors.ErrUnsupported.Error()+": ")
			if !strings.HasPrefix(state, "works") && !strings.HasPrefix(state, "failed") && ok {
				state = "unsupported: " + state
			}
			fmt.Fprintf(&b, " %s |", strings.ReplaceAll(state, "|", `\|`))
		}
		b.WriteString("\n")
	}
	for _, tp := range sortedKeys(tracepoints) {
		collector, name, _ := strings.Cut(tp, " ")
		fmt.Fprintf(&b, "| %s: `%s` |", collector, name)
		for _, s := range vm.Suites {
			attached, tried := results[s.Key()].Tracepoints[tp]
			switch {
			case !tried:
				b.WriteString(" — |")
			case attached:
				b.WriteString(" attached |")
			default:
				b.WriteString(" absent, counters off |")
			}
		}
		b.WriteString("\n")
	}
	for _, cmd := range sortedKeys(commands) {
		collector, name, _ := strings.Cut(cmd, " ")
		fmt.Fprintf(&b, "| %s: `%s` |", collector, name)
		for _, s := range vm.Suites {
			r := results[s.Key()]
			hint, lacks := r.Commands[cmd]
			switch {
			case lacks:
				fmt.Fprintf(&b, " unsupported: %s |", hint)
			case r.Collectors[collector] == "works":
				b.WriteString(" works |")
			default:
				b.WriteString(" — |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
