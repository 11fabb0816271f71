package collector

import (
	"regexp"
	"strings"
	"testing"
)

// maxHelp is the longest HELP a family may have: one sentence saying what
// is counted, in which unit, from which kernel source; the rest belongs
// in METRICS.md (Family.Doc) and the collector's page.
const maxHelp = 120

// helpNamesFlagOrPath matches what a HELP must not name: a flag, which
// belongs to --help, or a documentation path, which belongs to METRICS.md.
var helpNamesFlagOrPath = regexp.MustCompile(`--[a-z]|\bdocs/|\.md\b`)

// TestCatalogueInterface holds every declared family to the interface
// rules of docs/dev/metrics-design.md: its name starts with its collector's
// (the exporter's own xdp_scrape_* alone excepted), it has a stability
// level, and its HELP is one sentence of at most maxHelp characters that
// names no flag or doc path, an experimental family's saying so.
func TestCatalogueInterface(t *testing.T) {
	names := map[string]bool{}
	for _, r := range Registrations() {
		names[r.Name] = true
	}
	for _, f := range Catalogue() {
		switch {
		case f.Collector == "":
			if !strings.HasPrefix(f.Name, Namespace+"_scrape_") {
				t.Errorf("%s is the exporter's own but not xdp_scrape_*", f.Name)
			}
		case !names[f.Collector]:
			t.Errorf("%s is sent by %q, which is no collector", f.Name, f.Collector)
		case !strings.HasPrefix(f.Name, Namespace+"_"+f.Collector+"_"):
			t.Errorf("%s does not start with the name of its collector %s", f.Name, f.Collector)
		}
		switch f.Stability {
		case Stable:
			if strings.HasPrefix(f.ExposedHelp(), experimentalHelp) {
				t.Errorf("%s is stable but its HELP says experimental", f.Name)
			}
		case Experimental:
			if !strings.HasPrefix(f.ExposedHelp(), experimentalHelp) {
				t.Errorf("%s is experimental but its HELP does not say so", f.Name)
			}
		default:
			t.Errorf("%s has no stability level", f.Name)
		}
		help := f.ExposedHelp()
		if n := len(help); n > maxHelp {
			t.Errorf("%s: HELP of %d characters, over %d: %q", f.Name, n, maxHelp, help)
		}
		if helpNamesFlagOrPath.MatchString(help) {
			t.Errorf("%s: HELP names a flag or doc path: %q", f.Name, help)
		}
		if !strings.HasSuffix(help, ".") || strings.Contains(strings.TrimSuffix(help, "."), ". ") {
			t.Errorf("%s: HELP is not one sentence ending in a full stop: %q", f.Name, help)
		}
		if f.Doc == f.Help {
			t.Errorf("%s: Doc repeats Help; leave it empty", f.Name)
		}
	}
}
