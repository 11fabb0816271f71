package dashboards

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/mdsection"
)

// seriesRef finds what an expression reads: exporter families (or the
// prefix of a family regex, as in {__name__=~"xdp_xsk_(rx|tx)_..."}),
// recorded series (level:metric:operations) and ALERTS.
var seriesRef = regexp.MustCompile(`[a-z_]*:?xdp_[a-z0-9_]+(:[a-z0-9_]+)?|\bALERTS\b`)

// sources resolves what panels read to the collectors that export it
// (collector.Catalogue) and the rule files that record it.
type sources struct {
	families []*collector.Family
	optIn    map[string]bool
	// rules maps a recorded series to its rule file and expressions
	// (one series may be recorded by several rules, as the PCIe estimate
	// is per direction).
	rules map[string]recording
}

type recording struct {
	file  string
	exprs []string
}

// alertsFile is the rule file holding the edge's alerts, which ALERTS
// reflects; globalFile the global tier's rules (global.go).
const (
	alertsFile = "rules/alerts.yml"
	globalFile = "rules/global.yml"
)

func newSources(cfg Config) sources {
	s := sources{families: collector.Catalogue(), optIn: map[string]bool{}, rules: map[string]recording{}}
	for _, r := range collector.Registrations() {
		s.optIn[r.Name] = !r.DefaultEnabled
	}
	for file, rf := range ruleFiles(cfg) {
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					rec := s.rules[r.Record]
					rec.file, rec.exprs = file, append(rec.exprs, r.Expr)
					s.rules[r.Record] = rec
				}
			}
		}
	}
	return s
}

// of returns the collectors and rule files exprs read. A name that is
// neither a family of the catalogue nor recorded by a rule is an error:
// the panel would stay empty.
func (s sources) of(exprs ...string) (collectors, files []string, err error) {
	cs, fs := map[string]bool{}, map[string]bool{}
	seen := map[string]bool{}
	var visit func(expr string) error
	visit = func(expr string) error {
		for _, name := range seriesRef.FindAllString(expr, -1) {
			if seen[name] {
				continue
			}
			seen[name] = true
			switch rec, ok := s.rules[name]; {
			case name == "ALERTS":
				fs[alertsFile] = true
				cs["the alert rules"] = true
			case ok:
				fs[rec.file] = true
				for _, e := range rec.exprs {
					if err := visit(e); err != nil {
						return err
					}
				}
			case strings.Contains(name, ":"):
				return fmt.Errorf("%s: no rule records it", name)
			default:
				found := false
				for _, f := range s.families {
					if strings.HasPrefix(f.Name, name) || f.Type == collector.Histogram && histogramOf(name) == f.Name {
						found = true
						cs[s.collectorName(f.Collector)] = true
					}
				}
				if !found {
					return fmt.Errorf("%s: no family of the exporter", name)
				}
			}
		}
		return nil
	}
	for _, e := range exprs {
		if err := visit(e); err != nil {
			return nil, nil, err
		}
	}
	return sortedSet(cs), sortedSet(fs), nil
}

// collectorName is how the docs name a collector: opt-in ones with the
// flag that turns them on, the families of no collector as the exporter's.
func (s sources) collectorName(name string) string {
	switch {
	case name == "":
		return "the exporter itself"
	case s.optIn[name]:
		return name + " (--collector." + name + ")"
	}
	return name
}

// histogramOf is the histogram family a _bucket, _sum or _count series
// belongs to.
func histogramOf(series string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(series, suffix); ok {
			return f
		}
	}
	return ""
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PanelDocs renders docs/panels.md's per-panel section: for every
// panel what it shows (its description), the terminal tool it replaces
// and the collectors it needs.
func PanelDocs() (string, error) {
	cfg := DefaultConfig()
	src := newSources(cfg)
	var b strings.Builder
	for _, bd := range boards(cfg) {
		var all []string
		for _, r := range bd.rows {
			for _, p := range r.panels {
				for _, t := range p.targets {
					all = append(all, t.expr)
				}
			}
		}
		_, files, err := src.of(all...)
		if err != nil {
			return "", fmt.Errorf("%s: %w", bd.title, err)
		}
		fmt.Fprintf(&b, "## %s\n\n", bd.title)
		if len(files) > 0 {
			fmt.Fprintf(&b, "Rule files it reads: %s.\n\n", "`dashboards/"+strings.Join(files, "`, `dashboards/")+"`")
		}
		for _, r := range bd.rows {
			fmt.Fprintf(&b, "### %s\n\n", r.title)
			for _, p := range r.panels {
				tool := r.tool
				if p.tool != "" {
					tool = p.tool
				}
				var exprs []string
				for _, t := range p.targets {
					exprs = append(exprs, t.expr)
				}
				collectors, files, err := src.of(exprs...)
				if err != nil {
					return "", fmt.Errorf("%s / %s: %w", bd.title, p.title, err)
				}
				fmt.Fprintf(&b, "**%s.** %s Replaces: %s. Needs: %s", p.title, p.description, tool, strings.Join(collectors, ", "))
				if len(files) > 0 {
					fmt.Fprintf(&b, "; rules: %s", strings.Join(files, ", "))
				}
				if p.needs != "" {
					fmt.Fprintf(&b, "; has data with %s", p.needs)
				}
				if p.exempt != "" {
					fmt.Fprintf(&b, "; on the veth lab it stays empty (%s)", p.exempt)
				}
				if p.runbook != "" {
					fmt.Fprintf(&b, "; links to the runbook's %s", p.runbook)
				}
				b.WriteString(".\n\n")
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// Markers of the generated section in docs/panels.md.
const (
	PanelDocsBegin = "<!-- panels: generated by go generate ./dashboards; do not edit -->\n"
	PanelDocsEnd   = "<!-- end of panels -->\n"
)

// WithPanelDocs replaces the generated section of a docs/panels.md.
func WithPanelDocs(doc string) (string, error) {
	panels, err := PanelDocs()
	if err != nil {
		return "", err
	}
	return mdsection.Replace(doc, PanelDocsBegin, PanelDocsEnd, "\n"+panels+"\n")
}
