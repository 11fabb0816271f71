// Command xdp-top shows the views of xdp_rxq_info, xdp_monitor,
// napi_monitor, ethtool_stats.pl and mpstat/perf stat live in one
// terminal, as per-second rates computed from scrapes of one or more
// xdp_exporter endpoints.
package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/prometheus/common/config"

	"github.com/xdp-exporter/xdp_exporter/cmd/xdp-top/internal/top"
)

func main() {
	// Each refresh decodes a whole scrape and drops the one before: with
	// the default GOGC the collector ran about once per refresh. A heap a
	// few times larger (tens of MB on a 128-CPU host) halves it; GOGC in
	// the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	app := kingpin.New("xdp-top", "Live per-second views of xdp_exporter endpoints: rxq, xdp, napi, nic, cpu.")
	endpoints := app.Flag("endpoint", "Exporter /metrics URL to scrape, as URL or NAME=URL; repeat for several hosts.").
		Default("http://localhost:9739/metrics").Strings()
	interval := app.Flag("interval", "Time between scrapes; rates are per second over it.").Default("1s").Duration()
	plain := app.Flag("plain", "No terminal UI: print the view as text once per interval, to pipe, log or diff.").Bool()
	view := app.Flag("view", "View to show first (with --plain: the view printed, or all): "+strings.Join(top.Views, ", ")+".").
		Default("overview").Enum(append(top.Views, "all")...)
	filter := app.Flag("device", "Show only devices whose name contains this.").String()
	duration := app.Flag("duration", "Without the terminal UI (--plain, --summary), stop after this long (0: run until interrupted).").Default("0s").Duration()
	summary := app.Flag("summary", "No terminal UI: at the end of the run (--duration, or Ctrl-C) print the per-second means over it, one row per RX queue and CPU, CPU and changed driver stat, as md (Markdown tables) or csv.").Enum("md", "csv")
	httpConfig := app.Flag("http.config", "File with the HTTP client configuration (TLS, basic auth), in the format of a Prometheus scrape config's http client section.").String()
	app.HelpFlag.Short('h')
	if _, err := app.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "xdp-top: error: %v (try --help)\n", err)
		return 2
	}
	if *interval <= 0 {
		fmt.Fprintln(os.Stderr, "xdp-top: error: --interval must be positive")
		return 2
	}
	client := &http.Client{Timeout: *interval}
	if *httpConfig != "" {
		cfg, _, err := config.LoadHTTPConfigFile(*httpConfig)
		if err != nil {
			fmt.Fprintf(os.Stderr, "xdp-top: error: --http.config: %v\n", err)
			return 2
		}
		if client, err = config.NewClientFromConfig(*cfg, "xdp-top"); err != nil {
			fmt.Fprintf(os.Stderr, "xdp-top: error: --http.config: %v\n", err)
			return 2
		}
		client.Timeout = *interval
	}
	eps, err := parseEndpoints(*endpoints, client)
	if err != nil {
		fmt.Fprintf(os.Stderr, "xdp-top: error: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *plain || *summary != "" {
		if *duration > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *duration)
			defer cancel()
		}
		textRun{interval: *interval, view: *view, filter: *filter, views: *plain, summary: *summary}.run(ctx, os.Stdout, eps)
		return 0
	}
	if *view == "all" {
		*view = "overview"
	}
	m := newModel(eps, *interval, *view, *filter)
	// The screen changes once per scrape or key press: 10 frames a second
	// is plenty, and bubbletea's default of 60 wakes the process six times
	// as often for nothing.
	if _, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithFPS(10)).Run(); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "xdp-top: %v\n", err)
		return 1
	}
	return 0
}

// parseEndpoints reads URL or NAME=URL; the name defaults to the host.
func parseEndpoints(specs []string, client *http.Client) ([]top.Endpoint, error) {
	var out []top.Endpoint
	for _, spec := range specs {
		name, raw, named := strings.Cut(spec, "=")
		if !named || strings.Contains(name, "/") {
			name, raw = "", spec
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--endpoint %q: want an http(s) URL such as http://localhost:9739/metrics", spec)
		}
		if name == "" {
			name = u.Host
		}
		out = append(out, top.Endpoint{Name: name, URL: u.String(), Client: client})
	}
	return out, nil
}
