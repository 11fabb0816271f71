package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/doclinks"
)

// The documentation is held to the code here: every flag and family it
// names exists, every default it states is --help's, the flags reference
// is generated, every local link and anchor resolves, and the user docs
// keep to their size. CONTRIBUTING.md says how to write docs that pass.

const (
	docsRoot = "../.."
	// flagsReference is generated from the flags themselves (make
	// generate): the one place a user reads every flag's default.
	flagsReference = "docs/flags.md"
	// panelsReference is generated from the dashboards' code (make
	// generate): each panel's description, as Grafana shows it.
	panelsReference = "docs/panels.md"
	readmeMaxWords  = 1500
	readmeMaxLine   = 300
	// userDocsMaxWords bounds README.md and docs/ apart from docs/dev/,
	// with the generated references (METRICS.md, docs/flags.md) left out.
	// 25,000 until the traffic generator's methods (what each needs of
	// the kernel and sends, how to force one) took their 600 words.
	userDocsMaxWords = 26000
)

// docFiles lists every Markdown file of the repository, relative to its
// root: README.md, CHANGELOG.md, CONTRIBUTING.md, METRICS.md and docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md", "METRICS.md"}
	err := filepath.WalkDir(filepath.Join(docsRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(docsRoot, path)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// userDocs are the pages written for users: README.md and docs/, without
// docs/dev/ (maintainers) and the generated references, docs/flags.md and
// docs/panels.md (the dashboards' own panel descriptions), which are
// looked up as METRICS.md is, not read through.
func userDocs(t *testing.T) []string {
	var out []string
	for _, f := range docFiles(t) {
		if f == "README.md" || strings.HasPrefix(f, "docs/") && !strings.HasPrefix(f, "docs/dev/") && f != flagsReference && f != panelsReference {
			out = append(out, f)
		}
	}
	return out
}

// checkedDocs are the files whose flags, families and defaults are
// checked: all but CHANGELOG.md, which records flags by the names they
// had.
func checkedDocs(t *testing.T) []string {
	return slices.DeleteFunc(docFiles(t), func(f string) bool { return f == "CHANGELOG.md" })
}

func readDoc(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docsRoot, f))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// flagModel is every flag of the exporter, as --help shows it.
func flagModel() []*kingpin.FlagModel {
	app := kingpin.New(program, "")
	addFlags(app)
	return app.Model().Flags
}

func flagDefaults() map[string]string {
	out := map[string]string{}
	for _, f := range flagModel() {
		out[f.Name] = strings.Join(f.Default, ",")
	}
	return out
}

// flagToken is a flag of the exporter's namespaces as a doc writes it:
// --collector.nic.sum-queues, --no-collector.cpu. A placeholder
// (--collector.NAME.metrics-include) ends the token at its capital.
var flagToken = regexp.MustCompile(`--(?:no-)?([a-z][a-z0-9-]*(?:\.[a-z0-9-]+)+)([A-Z<{*]?)`)

// foreignFlags are flags of other programs, in the same namespaces, that
// the docs show on those programs' command lines.
var foreignFlags = map[string]string{
	"web.enable-remote-write-receiver": "prometheus",
}

func TestDocsNameRealFlags(t *testing.T) {
	defaults := flagDefaults()
	namespaces := map[string]bool{}
	for name := range defaults {
		if ns, _, dotted := strings.Cut(name, "."); dotted {
			namespaces[ns] = true
		}
	}
	for _, f := range checkedDocs(t) {
		for _, m := range flagToken.FindAllStringSubmatch(readDoc(t, f), -1) {
			name := strings.TrimSuffix(m[1], ".")
			if m[2] != "" || !namespaces[strings.Split(name, ".")[0]] || foreignFlags[name] != "" {
				continue
			}
			if _, ok := defaults[name]; !ok {
				t.Errorf("%s names --%s, which is not a flag of the exporter (--help)", f, name)
			}
		}
	}
}

// familyToken is a metric name as the docs write it: xdp_ and the rest,
// not inside a longer word, a recording rule's name or a path.
var familyToken = regexp.MustCompile(`(^|[^\w:./-])(xdp_[a-z0-9_]+)`)

// notFamilies are the kernel's and the tools' names that start with xdp_
// and are no metric family: structs, tracepoints, programs, binaries,
// driver counters.
var notFamilies = map[string]bool{
	"xdp_exporter": true, "xdp_rxq_info": true, "xdp_monitor": true, "xdp_buff": true, "xdp_md": true,
	"xdp_dispatcher": true, "xdp_do_redirect": true, "xdp_redirect_map_err": true, "xdp_diag_info": true,
	"xdp_diag_msg": true, "xdp_diag_req": true, "xdp_diag_ring": true, "xdp_diag_stats": true,
	"xdp_drop": true, "xdp_tx": true, "xdp_drops": true, "xdp_xmit_failures_total": true, "xdp_filter": true,
	"xdp_ethtool": true, "xdp_action": true, "xdp_stats": true,
	// The xdp:* tracepoints.
	"xdp_exception": true, "xdp_bulk_tx": true, "xdp_redirect": true, "xdp_redirect_err": true,
	"xdp_redirect_map": true, "xdp_devmap_xmit": true, "xdp_cpumap_enqueue": true, "xdp_cpumap_kthread": true,
}

func TestDocsNameRealFamilies(t *testing.T) {
	known := map[string]bool{}
	var prefixes []string
	for _, fam := range collector.Catalogue() {
		known[fam.Name] = true
		if fam.RunTime() {
			prefixes = append(prefixes, strings.TrimSuffix(fam.Name, "<stat>"))
		}
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			known[fam.Name+s] = true
		}
		known[strings.TrimSuffix(fam.Name, "_total")+"_created"] = true
	}
	isFamily := func(name string) bool {
		if known[name] || notFamilies[name] {
			return true
		}
		for k := range known {
			// A prefix the doc names: xdp_netdev_qstats_.
			if strings.HasSuffix(name, "_") && strings.HasPrefix(k, name) {
				return true
			}
		}
		for _, p := range prefixes {
			// A member of a family named at run time:
			// xdp_nic_queue_stat_rx_packets.
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	for _, f := range checkedDocs(t) {
		for _, m := range familyToken.FindAllStringSubmatch(readDoc(t, f), -1) {
			if !isFamily(m[2]) {
				t.Errorf("%s names %s, which is no family of the exporter (METRICS.md)", f, m[2])
			}
		}
	}
}

// statedDefault is a default as prose states it: the flag in backticks,
// then, within the sentence, "default" and the value in backticks.
var statedDefault = regexp.MustCompile("`--([a-z][a-z0-9-]*(?:\\.[a-z0-9-]+)+)`[^.`]{0,60}?\\bdefault(?: is| to|:)? `([^`]*)`")

// tableDefault is a table row that gives a flag and, in the next cell,
// its default: | `--flag` | `value` |.
var tableDefault = regexp.MustCompile("(?m)^\\| `--([a-z][a-z0-9-]*(?:\\.[a-z0-9-]+)+)` \\| `([^`]*)` \\|")

func TestDocsStateDefaultsOfHelp(t *testing.T) {
	defaults := flagDefaults()
	for _, f := range checkedDocs(t) {
		if f == flagsReference {
			continue // generated from the defaults themselves
		}
		text := readDoc(t, f)
		stated := append(statedDefault.FindAllStringSubmatch(text, -1), tableDefault.FindAllStringSubmatch(text, -1)...)
		for _, m := range stated {
			if want, ok := defaults[m[1]]; ok && m[2] != want {
				t.Errorf("%s: --%s default `%s`; --help says %q", f, m[1], m[2], want)
			}
		}
	}
	// The README's collector table: | `name` | on/off | ...
	row := regexp.MustCompile("(?m)^\\| \\[?`([a-z]+)`\\]?(?:\\([^)]*\\))? \\| (on|off) \\|")
	rows := row.FindAllStringSubmatch(readDoc(t, "README.md"), -1)
	seen := map[string]bool{}
	for _, m := range rows {
		seen[m[1]] = true
		want := "off"
		if defaults["collector."+m[1]] == "true" {
			want = "on"
		}
		if m[2] != want {
			t.Errorf("README.md's collector table: %s %s, --help says %s", m[1], m[2], want)
		}
	}
	for _, r := range collector.Registrations() {
		if !seen[r.Name] {
			t.Errorf("README.md's collector table has no row for the %s collector", r.Name)
		}
	}
}

// renderFlagsReference is docs/flags.md: every flag, its default and its
// help, in --help's order.
func renderFlagsReference() string {
	var b strings.Builder
	b.WriteString("# Flags\n\n<!-- Generated by make generate from the flags themselves (cmd/xdp_exporter/docs_test.go); do not edit. -->\n\n")
	b.WriteString("Every flag of `xdp_exporter`, as `xdp_exporter --help` gives it (`-h`, `--help` alone prints them; `--version` the release). A boolean flag `--x` is turned off with `--no-x`.\n")
	b.WriteString("Where a family filter's default is long, `--collector.NAME.metrics-exclude-extra` adds to it without repeating it.\n\n")
	b.WriteString("| flag | default | what it does |\n|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, f := range flagModel() {
		if f.Hidden || f.Name == "help" {
			continue
		}
		def := strings.Join(f.Default, ",")
		if def == "" && f.IsBoolFlag() {
			def = "false"
		}
		if def != "" {
			def = "`" + cell(def) + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, cell(f.Help))
	}
	return b.String()
}

// TestDocsFlagsReference: docs/flags.md is what the flags say;
// XDP_EXPORTER_WRITE_DOCS=1 (make generate) rewrites it.
func TestDocsFlagsReference(t *testing.T) {
	want := renderFlagsReference()
	path := filepath.Join(docsRoot, flagsReference)
	if os.Getenv("XDP_EXPORTER_WRITE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := readDoc(t, flagsReference); got != want {
		t.Errorf("%s differs from the flags: make generate rewrites it", flagsReference)
	}
}

// heading is a Markdown ATX heading.
var heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)

// anchors returns the anchors the code host makes of a file's headings:
// lower case, punctuation but - and _ removed, spaces to -, a repeated
// one suffixed -1, -2. Headings inside code blocks are not headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		m := heading.FindStringSubmatch(line)
		if inCode || m == nil {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		if n := count[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		count[s]++
	}
	return out
}

// crossLink is a Markdown link to another file's anchor.
var crossLink = regexp.MustCompile(`\]\(([^)#:\s]+\.md)#([^)\s]+)\)`)

// TestDocsLinks: markdown-link-check finds every local link's file and
// every anchor within a file; links to another file's anchor are checked
// here.
func TestDocsLinks(t *testing.T) {
	files := docFiles(t)
	doclinks.Check(t, docsRoot, files)
	for _, f := range files {
		for _, m := range crossLink.FindAllStringSubmatch(readDoc(t, f), -1) {
			target := filepath.Join(filepath.Dir(f), m[1])
			b, err := os.ReadFile(filepath.Join(docsRoot, target))
			if err != nil {
				continue // markdown-link-check reports the missing file
			}
			if !anchors(string(b))[m[2]] {
				t.Errorf("%s links to %s#%s: %s has no such heading", f, m[1], m[2], target)
			}
		}
	}
}

// TestDocsForUsers: the README is a landing page, the user docs are of a
// size one reads, say nothing only maintainers need, and name sources by
// their public names.
func TestDocsForUsers(t *testing.T) {
	readme := readDoc(t, "README.md")
	if n := len(strings.Fields(readme)); n > readmeMaxWords {
		t.Errorf("README.md has %d words, more than %d: it is the landing page; the rest goes to docs/", n, readmeMaxWords)
	}
	for i, line := range strings.Split(readme, "\n") {
		if len(line) > readmeMaxLine {
			t.Errorf("README.md:%d is %d characters, more than %d", i+1, len(line), readmeMaxLine)
		}
	}
	total := 0
	maintainers := regexp.MustCompile(`(?m)^#+ (Tests|Cost)\b.*$`)
	for _, f := range userDocs(t) {
		text := readDoc(t, f)
		total += len(strings.Fields(text))
		for _, h := range maintainers.FindAllString(text, -1) {
			t.Errorf("%s has %q: tests and costs are written in docs/dev/ and docs/performance.md", f, h)
		}
	}
	if total > userDocsMaxWords {
		t.Errorf("the user docs have %d words, more than %d: say each thing once and link to it", total, userDocsMaxWords)
	}
	seed := regexp.MustCompile(`(?i)\bseeds?\b`)
	for _, f := range docFiles(t) {
		if loc := seed.FindStringIndex(readDoc(t, f)); loc != nil {
			t.Errorf("%s says %q: name the source by its public name", f, readDoc(t, f)[loc[0]:loc[1]])
		}
	}
}
