package archtest

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// licence is a licence a dependency of the shipped binaries may have:
// permissive ones, and, for what the lab's figures embed, the font and
// drawing libraries' own (their terms are in NOTICE).
type licence struct {
	id string
	// all are phrases the licence text has, in lower case and with runs
	// of white space as one space; none are phrases that tell it from a
	// look-alike.
	all, none []string
}

// allowed are the licences a dependency may have. The Go licence
// classifiers (google/licensecheck, licenseclassifier) are served here
// only as unapproved copies, so these phrases, written by hand, tell the
// licences the binaries' dependencies have apart; a dependency whose text
// none of them matches fails the test.
var allowed = []licence{
	{id: "Apache-2.0", all: []string{"apache license", "version 2.0, january 2004"}},
	{id: "MIT", all: []string{"permission is hereby granted, free of charge", "the above copyright notice and this permission notice shall be included"}},
	{id: "BSD-3-Clause", all: []string{"redistribution and use in source and binary forms", "neither the name of"}},
	{id: "BSD-3-Clause", all: []string{"redistribution and use in source and binary forms", "names of its contributors may"}},
	// libcap's psx offers its own wording of BSD-3-Clause or GPL-2.0-only
	// ("one or the other of these two Licenses"): the binaries take the
	// BSD terms.
	{id: "BSD-3-Clause", all: []string{"redistribution and use in source and binary forms", "the name of any author may not be used to endorse"}},
	{id: "BSD-2-Clause", all: []string{"redistribution and use in source and binary forms", "this list of conditions and the following disclaimer"},
		none: []string{"neither the name of", "names of its contributors may", "advertising"}},
	{id: "ISC", all: []string{"permission to use, copy, modify, and/or distribute this software for any purpose"}},
	// The FreeType licence, which golang/freetype offers beside GPL-2.0
	// (its LICENSE: "your choice of exactly one of"): the lab's figures
	// take it, and NOTICE credits the FreeType project as it asks.
	{id: "FTL", all: []string{"freetype license", "your choice of exactly one of"}},
	// ajstarks/svgo's Creative Commons Attribution: NOTICE attributes it.
	{id: "CC-BY-4.0", all: []string{"creative commons attribution 4.0 international public license"}},
}

// module is a dependency module of the shipped binaries.
type depModule struct{ path, dir string }

// shippedModules are the modules the three binaries link (tests and the
// go.mod tools aside).
func shippedModules(t *testing.T) []depModule {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}|{{.Dir}}{{end}}{{end}}", "./cmd/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var mods []depModule
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, d, ok := strings.Cut(l, "|"); ok && !slices.ContainsFunc(mods, func(m depModule) bool { return m.path == p }) {
			mods = append(mods, depModule{p, d})
		}
	}
	slices.SortFunc(mods, func(a, b depModule) int { return strings.Compare(a.path, b.path) })
	if len(mods) < 20 {
		t.Fatalf("go list names %d modules", len(mods))
	}
	return mods
}

var space = regexp.MustCompile(`[\s#*]+`)

// normalized is a licence text in lower case with runs of white space
// (and Markdown's marks) as one space.
func normalized(b []byte) string { return space.ReplaceAllString(strings.ToLower(string(b)), " ") }

// licenceFiles reads a module's files whose name says licence, copying
// or notice.
func licenceFiles(t *testing.T, dir string, prefixes ...string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		name := strings.ToLower(e.Name())
		if e.Type().IsRegular() && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = b
		}
	}
	return out
}

// classify names the allowed licence of a text, or "".
func classify(text string) string {
	for _, l := range allowed {
		if !slices.ContainsFunc(l.all, func(p string) bool { return !strings.Contains(text, p) }) &&
			!slices.ContainsFunc(l.none, func(p string) bool { return strings.Contains(text, p) }) {
			return l.id
		}
	}
	return ""
}

// TestDependencyLicences: every module the shipped binaries link has a
// licence file of an allowed licence, and NOTICE is what the generator
// writes from theirs (the NOTICE files of Apache-2.0 modules, which
// section 4(d) asks a redistribution to carry, and the attributions the
// FTL and CC-BY licences ask for). XDP_EXPORTER_RECORD=1 rewrites NOTICE.
func TestDependencyLicences(t *testing.T) {
	var ids []string
	notice := noticeHeader
	for _, m := range shippedModules(t) {
		files := licenceFiles(t, m.dir, "licen", "copying")
		if len(files) == 0 {
			t.Errorf("%s: no licence file in %s", m.path, m.dir)
			continue
		}
		var id string
		for _, name := range slices.Sorted(maps.Keys(files)) {
			if id = classify(normalized(files[name])); id != "" {
				break
			}
		}
		if id == "" {
			t.Errorf("%s: its licence (%s) is none of the allowed ones", m.path, strings.Join(slices.Sorted(maps.Keys(files)), ", "))
			continue
		}
		ids = append(ids, m.path+" "+id)
		notice += noticeOf(t, m, id)
	}
	t.Logf("%d modules:\n%s", len(ids), strings.Join(ids, "\n"))
	path := filepath.Join(root, "NOTICE")
	if testenv.Recording() {
		testenv.Check(t, os.WriteFile(path, []byte(notice), 0o644), "writing NOTICE")
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, []byte(notice)) {
		t.Errorf("NOTICE differs from the dependencies' notices (%v): XDP_EXPORTER_RECORD=1 go test ./internal/archtest -run TestDependencyLicences rewrites it", err)
	}
}

const noticeHeader = `xdp_exporter
Copyright The xdp_exporter Authors.

The Go code, dashboards and rules are under the Apache License 2.0
(LICENSE); the BPF programs (bpf/, lab/trafficgen) under GPL-2.0-only
(LICENSES/GPL-2.0-only.txt), as each file's SPDX line says. bpf/vmlinux.h
is generated from the Linux kernel's BTF (GPL-2.0).

The binaries include the modules below; their notices follow, as their
licences ask.
`

// noticeOf is a module's part of NOTICE: its NOTICE file (Apache-2.0),
// or the attribution its licence asks for.
func noticeOf(t *testing.T, m depModule, id string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(licenceFiles(t, m.dir, "notice"))) {
		b.WriteString("\n-- " + m.path + " (" + name + ")\n\n")
		b.Write(bytes.TrimSpace(licenceFiles(t, m.dir, "notice")[name]))
		b.WriteString("\n")
	}
	// Fonts embedded under the SIL Open Font License, which asks that
	// its text go with them.
	for name, text := range licenceFiles(t, m.dir, "license-sil") {
		b.WriteString("\n-- " + m.path + " (" + name + ")\n\n")
		b.Write(bytes.TrimSpace(text))
		b.WriteString("\n")
	}
	switch id {
	case "FTL":
		b.WriteString("\n-- " + m.path + "\n\nPortions of this software are copyright The FreeType Project (www.freetype.org).\nAll rights reserved. Used under the FreeType License.\n")
	case "CC-BY-4.0":
		b.WriteString("\n-- " + m.path + "\n\nSVGo by Anthony Starks, licensed under the Creative Commons Attribution 4.0\nInternational Public License.\n")
	}
	return b.String()
}

// TestLicenceOutsideAllowedRefused: the copyleft and weak-copyleft
// licences Debian ships the texts of match none of the allowed ones, and
// the allowed ones match themselves.
func TestLicenceOutsideAllowedRefused(t *testing.T) {
	for name, want := range map[string]string{"GPL-2": "", "GPL-3": "", "LGPL-2.1": "", "LGPL-3": "", "MPL-2.0": "",
		"Apache-2.0": "Apache-2.0", "BSD": "BSD-3-Clause"} {
		b, err := os.ReadFile("/usr/share/common-licenses/" + name)
		if err != nil {
			testenv.Unavailable(t, "Debian's licence texts (base-files): %v", err)
			return
		}
		if got := classify(normalized(b)); got != want {
			t.Errorf("%s classifies as %q, want %q", name, got, want)
		}
	}
}

// TestInstallDepsLeavesServices: the script the test command runs first
// installs packages and never stops, starts, restarts or disables a
// service of the host (Debian's prometheus, node_exporter and
// Alertmanager run as the host's own; the tests use ports of their own).
func TestInstallDepsLeavesServices(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "scripts", "install-deps"))
	if err != nil {
		t.Fatal(err)
	}
	service := regexp.MustCompile(`\b(systemctl|service|invoke-rc\.d|update-rc\.d|pkill|killall)\s`)
	for i, line := range strings.Split(string(b), "\n") {
		if code, _, _ := strings.Cut(line, "#"); service.MatchString(code) {
			t.Errorf("scripts/install-deps:%d touches a service: %s", i+1, line)
		}
	}
}
