package exportertest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Commit is the checkout's HEAD as a build stamps it: the revision, and
// the commit's date in UTC in prometheus/common/version's layout (the
// Makefile and scripts/build-binary take the build date from the commit,
// SOURCE_DATE_EPOCH, so that builds of one commit are the same).
func Commit(t testing.TB) (revision, date string) {
	t.Helper()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	return git("rev-parse", "HEAD"), git("log", "-1", "--format=%cd", "--date=format-local:%Y%m%d-%H:%M:%S")
}
