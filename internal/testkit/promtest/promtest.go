// Package promtest runs a real Prometheus server (Debian's prometheus
// package) for end-to-end tests: it scrapes the given targets every second
// and answers queries through its HTTP API.
package promtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// Server is a running Prometheus.
type Server struct {
	URL string
	API v1.API
}

// WriteURL is the server's remote-write receiver, which
// --web.enable-remote-write-receiver turns on.
func (s *Server) WriteURL() string { return s.URL + "/api/v1/write" }

// Start runs Prometheus scraping targets (host:port) as job "xdp" every
// second, with ruleFiles loaded, and stops it when the test ends.
func Start(t testing.TB, targets []string, ruleFiles ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	return StartConfig(t, writeConfig(t, dir, targets, ruleFiles))
}

// StartConfig runs Prometheus with the configuration file cfgPath and
// flags (--web.enable-remote-write-receiver, say), and stops it when the
// test ends.
func StartConfig(t testing.TB, cfgPath string, flags ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testenv.Unavailable(t, "prometheus not installed (apt-get install prometheus)")
		return nil
	}
	dir := t.TempDir()
	addr := exportertest.FreeAddr(t)
	startDaemon(t, dir, "prometheus", exec.Command(bin, append([]string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}, flags...)...))
	s := &Server{URL: "http://" + addr}
	waitReady(t, s.URL)
	client, err := api.NewClient(api.Config{Address: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	s.API = v1.NewAPI(client)
	return s
}

// startDaemon starts cmd with its output in dir/NAME.log, and at the end
// of the test interrupts it (kills it after 10 s) and logs its output if
// the test failed.
func startDaemon(t testing.TB, dir, name string, cmd *exec.Cmd) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s log:\n%s", name, b)
			}
		}
	})
}

// writeConfig writes a prometheus.yml that scrapes targets every second
// with ruleFiles loaded, and returns its path.
func writeConfig(t testing.TB, dir string, targets, ruleFiles []string) string {
	t.Helper()
	var rules strings.Builder
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rules, "  - %q\n", abs)
	}
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = fmt.Sprintf("%q", tg)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
%sscrape_configs:
  - job_name: xdp
    static_configs:
      - targets: [%s]
`, rules.String(), strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath
}

// waitReady waits up to 30 s for the server (Prometheus, Alertmanager) at
// url to say it is ready.
func waitReady(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not ready", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Query evaluates expr at the current time.
func (s *Server) Query(ctx context.Context, expr string) (model.Value, error) {
	v, warnings, _, err := s.API.Query(ctx, expr, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	if len(warnings) > 0 {
		return v, fmt.Errorf("%s: warnings %v", expr, warnings)
	}
	return v, nil
}

// Scalar evaluates expr and returns its single value.
func (s *Server) Scalar(ctx context.Context, expr string) (float64, error) {
	v, err := s.Query(ctx, expr)
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case model.Vector:
		if len(v) != 1 {
			return 0, fmt.Errorf("%s: %d samples, want 1", expr, len(v))
		}
		return float64(v[0].Value), nil
	case *model.Scalar:
		return float64(v.Value), nil
	}
	return 0, fmt.Errorf("%s: unexpected result type %s", expr, v.Type())
}

// RemoteWritten is what the server's remote write sent per second over
// d, samples and bytes, from its own metrics (which it does not scrape).
// It reports by its error, so it may run on a goroutine of its own.
func (s *Server) RemoteWritten(d time.Duration) (samples, bytes float64, err error) {
	read := func() (float64, float64, error) {
		resp, err := http.Get(s.URL + "/metrics")
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, 0, err
		}
		self, err := exportertest.Decode(string(b))
		if err != nil {
			return 0, 0, err
		}
		sent, n := self.Sum("prometheus_remote_storage_samples_total")
		bytes, m := self.Sum("prometheus_remote_storage_bytes_total")
		if n == 0 || m == 0 {
			return 0, 0, fmt.Errorf("%s/metrics has no remote write counters", s.URL)
		}
		return sent, bytes, nil
	}
	s0, b0, err := read()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	time.Sleep(d)
	s1, b1, err := read()
	secs := time.Since(start).Seconds()
	return (s1 - s0) / secs, (b1 - b0) / secs, err
}
