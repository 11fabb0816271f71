// Command xdp_exporter serves XDP, NAPI, NIC and CPU telemetry to Prometheus.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf/rlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
)

const program = "xdp_exporter"

// defaultListenAddress uses 9739, a port no widely used exporter claims
// (node_exporter has 9100, ethtool_exporter 9417, 9435 is taken too).
const defaultListenAddress = ":9739"

func main() {
	os.Exit(run(os.Args[1:]))
}

// A binary built without the Makefile's -ldflags (go build, go install
// MODULE@VERSION) says what it is from the Go toolchain's build
// information: the module's version for a download, "(devel)" for a
// checkout, whose VCS revision prometheus/common/version reads from the
// same information where the build recorded it (-buildvcs).
func init() {
	if bi, ok := debug.ReadBuildInfo(); ok && version.Version == "" {
		version.Version = bi.Main.Version
	}
}

func run(args []string) int {
	app := kingpin.New(program, "Prometheus exporter for XDP, NAPI, NIC (ethtool) and per-CPU softirq telemetry.")
	var (
		metricsPath = app.Flag("web.telemetry-path", "Path under which to expose metrics.").
				Default("/metrics").String()
		maxRequests = app.Flag("web.max-requests", "Maximum number of parallel scrape requests; 0 disables the limit.").
				Default("40").Int()
		defaultTimeout = app.Flag("web.scrape-timeout", "Scrape deadline used when Prometheus sends no X-Prometheus-Scrape-Timeout-Seconds header.").
				Default("10s").Duration()
		dropCaps = app.Flag("runtime.drop-capabilities", "Once the collectors have loaded and attached their BPF programs, drop every Linux capability except those the enabled collectors still need at scrape time (see docs/privileges.md).").
				Default("false").Bool()
		webConfig = kingpinflag.AddFlags(app, defaultListenAddress)
		logConfig = &promslog.Config{}
	)
	promslogflag.AddFlags(app, logConfig)
	selection := collector.AddFlags(app)
	app.Version(versionText(program))
	app.HelpFlag.Short('h')
	args, deprecated := collector.RenameDeprecatedFlags(args)
	if _, err := app.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v (try --help)\n", program, err)
		return 2
	}
	if err := selection.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", program, err)
		return 2
	}

	logger := promslog.New(logConfig)
	logger.Info("starting "+program, "version", version.Info(), "collectors", selection.Enabled())
	for _, flag := range deprecated {
		logger.Warn("flag of a collector renamed in 1.0, parsed under its new name; the old name goes in 1.1 (CHANGELOG.md)", "flag", flag)
	}

	// Kernels before 5.11 charge BPF maps and programs to RLIMIT_MEMLOCK,
	// whose default (64 KiB or 8 MiB) is too low for the collectors' maps;
	// lift it before any BPF object is made. On later kernels this does
	// nothing. Without CAP_SYS_RESOURCE it fails, and a collector the
	// kernel then refuses names the limit as the cause.
	if err := rlimit.RemoveMemlock(); err != nil {
		logger.Warn("cannot lift RLIMIT_MEMLOCK, which this kernel charges BPF memory to; BPF collectors may be refused", "err", err)
	}

	set := collector.NewSet(selection.Build(logger), logger)
	set.UpdateFloor = *defaultTimeout
	defer func() {
		if err := set.Close(); err != nil {
			logger.Error("closing collectors", "err", err)
		}
	}()

	if *dropCaps {
		if err := dropCapabilities(selection, logger); err != nil {
			logger.Error("dropping capabilities", "err", err)
			return 1
		}
	}

	mux, err := serveMux(set, *metricsPath, *maxRequests, *defaultTimeout, logger)
	if err != nil {
		logger.Error("building landing page", "err", err)
		return 1
	}
	return serveUntilSignal(&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, webConfig, logger)
}

// dropCapabilities drops every capability but those the enabled
// collectors need at scrape time.
func dropCapabilities(selection *collector.Selection, logger *slog.Logger) error {
	res, err := caps.Drop(caps.Of(selection.ScrapeCapabilities()...))
	if err != nil {
		return err
	}
	logger.Info("dropped capabilities", "before", res.Before.Permitted, "kept", res.After.Permitted)
	if res.BoundingKept {
		logger.Info("bounding set left as is: no CAP_SETPCAP to reduce it; it only limits execve, which the exporter never calls", "bounding", res.After.Bounding)
	}
	return nil
}

// serveMux serves the metrics at metricsPath and a landing page at /.
func serveMux(set *collector.Set, metricsPath string, maxRequests int, defaultTimeout time.Duration, logger *slog.Logger) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	mux.Handle(metricsPath, metricsHandler(set, processCollectors(), logger, maxRequests, defaultTimeout))
	if metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        program,
			Description: "XDP, NAPI, NIC and CPU telemetry for Prometheus",
			Version:     version.Info(),
			Links:       []web.LandingLinks{{Address: metricsPath, Text: "Metrics"}},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

// serveUntilSignal serves until the server fails or SIGINT or SIGTERM asks it to
// stop; it returns the exit code.
func serveUntilSignal(server *http.Server, webConfig *web.FlagConfig, logger *slog.Logger) int {
	serveErr := make(chan error, 1)
	go func() { serveErr <- web.ListenAndServe(server, webConfig, logger) }()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Error("cannot serve", "err", err)
			return 1
		}
	case sig := <-stop:
		logger.Info("shutting down", "signal", sig.String())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := server.Shutdown(ctx); err != nil {
			logger.Error("shutting down web server", "err", err)
		}
	}
	return 0
}

// processCollectors are the exporter's own metrics: Go runtime, process
// and build information.
func processCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector(program),
	}
}

// metricsHandler gathers the collectors afresh for every request, bounded by
// the scrape timeout Prometheus announces (minus a little for the transfer),
// so a hung source cannot hold the scrape past the point Prometheus gives up.
func metricsHandler(set *collector.Set, process []prometheus.Collector, logger *slog.Logger, maxRequests int, defaultTimeout time.Duration) http.Handler {
	errLog := slog.NewLogLogger(logger.Handler(), slog.LevelError)
	// The in-flight limit lives here, not in promhttp.HandlerOpts: the
	// promhttp handler is built afresh per request, so its own limit would
	// count one request at a time.
	var inFlight chan struct{}
	if maxRequests > 0 {
		inFlight = make(chan struct{}, maxRequests)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inFlight != nil {
			select {
			case inFlight <- struct{}{}:
				defer func() { <-inFlight }()
			default:
				http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", maxRequests), http.StatusServiceUnavailable)
				return
			}
		}
		timeout := defaultTimeout
		if v := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"); v != "" {
			if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
				timeout = time.Duration(s * float64(time.Second) * 0.9)
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()

		// One registry per request, whose collector is bound to the
		// request's deadline; one registry for everything, so each
		// sample is checked and sorted once (prometheus.Gatherers would
		// do both again to merge two).
		reg := prometheus.NewRegistry()
		reg.MustRegister(process...)
		reg.MustRegister(set.Scrape(ctx))
		cw, finish := compressed(w, r)
		defer finish()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorLog:           errLog,
			ErrorHandling:      promhttp.ContinueOnError,
			DisableCompression: true,
			// The counters created at run time carry their created
			// timestamp: OpenMetrics serves it as _created, the
			// protobuf format Prometheus asks for with
			// created-timestamp-zero-ingestion as created_timestamp;
			// the classic text format, which has no place for it,
			// stays as it was.
			EnableOpenMetrics:                   true,
			EnableOpenMetricsTextCreatedSamples: true,
		}).ServeHTTP(cw, r)
	})
}
