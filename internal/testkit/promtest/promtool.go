package promtest

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// CheckMetrics runs `promtool check metrics` (Prometheus' naming and
// exposition rules) on a scrape body; promtool comes from Debian's
// prometheus package, which .ci/run installs.
func CheckMetrics(t testing.TB, body string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Unavailable(t, "promtool not installed (apt-get install prometheus)")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
