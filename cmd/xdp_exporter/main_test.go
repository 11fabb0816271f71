package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xskdiag"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// exporter is a running xdp_exporter process.
type exporter = exportertest.Process

// startExporter runs the binary with args on a free loopback port and waits
// until it answers; it is stopped with SIGINT when the test ends.
func startExporter(t testing.TB, args ...string) *exporter {
	t.Helper()
	return exportertest.Run(t, exportertest.FreeAddr(t), args...)
}

// TestScrapeDefaults starts the exporter with no collector flags, scrapes
// it, lints the result with promtool and checks that every family it
// exposes is documented in METRICS.md, and that every enabled collector
// succeeded.
func TestScrapeDefaults(t *testing.T) {
	testenv.Privileged(t)
	pair := vethtest.Pair(t, 2)
	e := startExporter(t)
	body := e.Scrape(t)
	promtest.CheckMetrics(t, body)

	// The test's veth shows up per queue, and the CPU families mpstat's
	// columns come from are there.
	for _, want := range []string{
		`xdp_nic_rx_xdp_processed_packets_total{device="` + pair.Host.Name + `",queue="0"}`,
		`xdp_nic_rx_xdp_processed_packets_total{device="` + pair.Host.Name + `",queue="1"}`,
		`xdp_cpu_seconds_total{cpu="0",mode="softirq"}`,
		`xdp_cpu_seconds_total{cpu="0",mode="idle"}`,
	} {
		if !strings.Contains(body, want+" ") {
			t.Errorf("scrape lacks %s", want)
		}
	}

	documented := map[string]bool{}
	var patterns []string
	for _, f := range collector.Catalogue() {
		if i := strings.Index(f.Name, "<"); i >= 0 {
			patterns = append(patterns, f.Name[:i])
			continue
		}
		documented[f.Name] = true
		if f.Type == collector.Histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				documented[f.Name+s] = true
			}
		}
	}
	for name := range exportertest.Parse(t, body) {
		if !strings.HasPrefix(name, collector.Namespace+"_") || strings.HasPrefix(name, "xdp_exporter_build_info") {
			continue
		}
		ok := documented[name]
		for _, p := range patterns {
			ok = ok || strings.HasPrefix(name, p)
		}
		if !ok {
			t.Errorf("family %s is exposed but not in METRICS.md's catalogue", name)
		}
	}
	// Nothing fails on this host; what its kernel lacks is reported as
	// unsupported, logged once at INFO, and no line is an ERROR.
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "xdp_scrape_collector_success{") && strings.HasSuffix(line, " 0") {
			t.Errorf("default collector failed on this host: %s\nlog:\n%s", line, e.Stderr)
		}
	}
	if strings.Contains(e.Stderr.String(), "level=ERROR") {
		t.Errorf("the default exporter logged an error on this host:\n%s", e.Stderr)
	}
	unsupported := unsupportedHere(t)
	for name, why := range unsupported {
		if !strings.Contains(body, `xdp_scrape_collector_unsupported{collector="`+name+`"} 1`) {
			t.Errorf("collector %s (%s) not reported unsupported", name, why)
		}
	}
	for _, name := range []string{"netdev", "xsk"} {
		if _, lacks := unsupported[name]; !lacks && !strings.Contains(body, `xdp_scrape_collector_unsupported{collector="`+name+`"} 0`) {
			t.Errorf("collector %s: the kernel has what it reads, but it is not reported supported", name)
		}
	}
	if n := strings.Count(e.Stderr.String(), `msg="collector not supported on this host`); n != len(unsupported) {
		t.Errorf("unsupported collectors logged %d times at INFO, want once each (%d: %v):\n%s", n, len(unsupported), unsupported, e.Stderr)
	}
}

// unsupportedHere lists the default collectors the running kernel cannot
// serve, with the reason, probed the way the exporter probes: the netdev
// generic netlink family (Linux 6.3+) and AF_XDP socket diag
// (CONFIG_XDP_SOCKETS_DIAG, a module that autoloads on stock kernels).
func unsupportedHere(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	if c, err := netdev.Dial(); errors.Is(err, netdev.ErrNoFamily) {
		out["netdev"] = err.Error()
	} else if err == nil {
		c.Close()
	}
	if c, err := xskdiag.Dial(); errors.Is(err, xskdiag.ErrNotSupported) {
		out["xsk"] = err.Error()
	} else if err == nil {
		c.Close()
	}
	return out
}

// TestBadInput checks that each kind of bad start-up input exits non-zero
// with one clear line on stderr.
func TestBadInput(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--no-such-flag"}, "unknown long flag '--no-such-flag'"},
		{"flag of a disabled collector", []string{"--collector.rxq.device=eth0"}, "--collector.rxq.device given but collector rxq is disabled; enable it with --collector.rxq"},
		{"address in use", []string{"--web.listen-address=" + busy.Addr().String()}, "address already in use"},
		{"unreadable web config", []string{"--web.listen-address=127.0.0.1:0", "--web.config.file=/nonexistent/web.yml"}, "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, exportertest.Build(t), tc.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("exit: %v (timeout: %v), want a non-zero exit", err, ctx.Err())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr does not say %q:\n%s", tc.want, stderr.String())
			}
			if lines := strings.Count(strings.TrimSpace(lastError(stderr.String())), "\n"); lines > 0 {
				t.Fatalf("error spans %d lines:\n%s", lines+1, stderr.String())
			}
		})
	}
}

// lastError returns the last log line, where the fatal error is reported.
func lastError(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestDisableDefaultsOneCollector: `--collector.disable-defaults
// --collector.nic` runs the ethtool collector and nothing else.
func TestDisableDefaultsOneCollector(t *testing.T) {
	e := startExporter(t, "--collector.disable-defaults", "--collector.nic")
	body := e.Scrape(t)
	var success []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "xdp_scrape_collector_success{") {
			success = append(success, l)
		}
	}
	if len(success) != 1 || success[0] != `xdp_scrape_collector_success{collector="nic"} 1` {
		t.Fatalf("collectors that ran: %q, want ethtool alone, succeeding", success)
	}
}
