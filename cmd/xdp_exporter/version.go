package main

import (
	"strings"

	"github.com/prometheus/common/version"
)

// versionText is what --version prints: prometheus/common/version's
// fields, as version.Print lays them out, without those the build did
// not record (version.Print writes "branch: , revision: unknown" and
// empty build lines for a plain go build without VCS data).
func versionText(program string) string {
	var b strings.Builder
	b.WriteString(program + ", version " + known(version.Version))
	var ids []string
	for _, f := range [][2]string{{"branch", version.Branch}, {"revision", version.GetRevision()}} {
		if v := known(f[1]); v != "" {
			ids = append(ids, f[0]+": "+v)
		}
	}
	if len(ids) > 0 {
		b.WriteString(" (" + strings.Join(ids, ", ") + ")")
	}
	for _, f := range [][2]string{
		{"build user", version.BuildUser}, {"build date", version.BuildDate},
		{"go version", version.GoVersion}, {"platform", version.GoOS + "/" + version.GoArch},
		{"tags", version.GetTags()},
	} {
		if v := known(f[1]); v != "" {
			b.WriteString("\n  " + f[0] + ":" + strings.Repeat(" ", 17-len(f[0])) + v)
		}
	}
	return b.String()
}

// known is v, or "" where the build recorded nothing ("unknown").
func known(v string) string {
	if v == "unknown" {
		return ""
	}
	return v
}
