// Command xdp_exporter serves XDP, NAPI, NIC and CPU telemetry to Prometheus.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf/rlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
	"github.com/xdp-exporter/xdp_exporter/internal/privsep"
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

// options are the flags outside the collectors'.
type options struct {
	dropCaps  *bool
	separate  *bool
	logConfig *promslog.Config
	selection *collector.Selection
}

// addFlags declares every flag on app; the options fill in at Parse, the
// web options when the returned function is called after it.
func addFlags(app *kingpin.Application) (*options, func() webOptions) {
	o := &options{logConfig: &promslog.Config{}}
	metricsPath := app.Flag("web.telemetry-path", "Path under which to expose metrics.").
		Default("/metrics").String()
	maxRequests := app.Flag("web.max-requests", "Maximum number of parallel scrape requests; 0 disables the limit.").
		Default("40").Int()
	defaultTimeout := app.Flag("web.scrape-timeout", "Scrape deadline used when Prometheus sends no X-Prometheus-Scrape-Timeout-Seconds header.").
		Default("10s").Duration()
	o.dropCaps = app.Flag("runtime.drop-capabilities", "Once the collectors have loaded and attached their BPF programs, drop every Linux capability except those the enabled collectors still need at scrape time (see docs/privileges.md).").
		Default("true").Bool()
	o.separate = app.Flag("runtime.privilege-separation", "Serve HTTP from a second process that holds no capability and runs under a seccomp filter; this process keeps the collectors and answers only its requests for a gather (see docs/privileges.md).").
		Default("true").Bool()
	webConfig := kingpinflag.AddFlags(app, defaultListenAddress)
	promslogflag.AddFlags(app, o.logConfig)
	o.selection = collector.AddFlags(app)
	return o, func() webOptions {
		return webOptions{flags: webConfig, metricsPath: *metricsPath, maxRequests: *maxRequests, defaultTimeout: *defaultTimeout}
	}
}

func run(args []string) int {
	app := kingpin.New(program, "Prometheus exporter for XDP, NAPI, NIC (ethtool) and per-CPU softirq telemetry.")
	opts, parsedWeb := addFlags(app)
	selection := opts.selection
	app.Version(versionText(program))
	app.HelpFlag.Short('h')
	renamed, deprecated := collector.RenameDeprecatedFlags(args)
	if _, err := app.Parse(renamed); err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v (try --help)\n", program, err)
		return 2
	}
	if err := selection.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", program, err)
		return 2
	}

	logger := promslog.New(opts.logConfig)
	web := parsedWeb()
	if listeners, ok := serverRole(); ok {
		return runServer(listeners, web, logger)
	}
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
	set.UpdateFloor = web.defaultTimeout
	defer func() {
		if err := set.Close(); err != nil {
			logger.Error("closing collectors", "err", err)
		}
	}()
	expose := exposer(gatherer(set, processCollectors()), logger)

	// The listeners are made before the drop, so that a port below 1024
	// needs CAP_NET_BIND_SERVICE at start only.
	files, err := listen(web.flags, logger)
	if err != nil {
		logger.Error("cannot listen", "err", err)
		return 1
	}
	if *opts.dropCaps {
		if err := dropCapabilities(selection, logger); err != nil {
			logger.Error("dropping capabilities", "err", err)
			return 1
		}
	}
	if *opts.separate {
		server, err := startServer(args, files)
		if err != nil {
			logger.Error("starting the HTTP server process", "err", err)
			return 1
		}
		return server.monitor(expose, web.maxRequests, logger)
	}
	listeners, err := fileListeners(files)
	if err != nil {
		logger.Error("cannot listen", "err", err)
		return 1
	}
	return serveOn(listeners, web, local(expose), signalled(logger), logger)
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
		logger.Info("bounding set left as is: no CAP_SETPCAP to reduce it; it only limits what an execve gains, and the one program the exporter executes, its HTTP server, drops every capability at start", "bounding", res.After.Bounding)
	}
	return nil
}

// webOptions are the flags of the HTTP side.
type webOptions struct {
	flags          *web.FlagConfig
	metricsPath    string
	maxRequests    int
	defaultTimeout time.Duration
}

// exposeFunc gathers every collector once, bounded by timeout and ctx,
// and encodes the families in format (privsep.ExposeFunc with the
// deadline given as a timeout, as the server sends it to the monitor).
type exposeFunc func(ctx context.Context, timeout time.Duration, format expfmt.Format) ([]byte, error)

// gatherer gathers the collectors and the process collectors, bound to
// ctx: everything but the Go runtime's collector in one registry, so each
// sample is checked and sorted once (prometheus.Gatherers would do both
// again to merge two).
//
// The Go runtime's collector is gathered alone and before the rest: go_goroutines then counts the exporter at rest plus a
// fixed few of the scrape's own (the monitor's answer, the registry's
// collect worker and its closer). Gathered with the others, it counted
// however many collect workers client_golang's registry had started by
// the time it ran, which the registry starts on demand: the same idle
// exporter read 8 or 9 from scrape to scrape (25 when the collector set
// ran first), and a leak check that took the least of some scrapes as
// its baseline failed when a lucky 8 came before and none after. Its
// families (go_*) are no other collector's, so the two lists merge by
// name alone.
func gatherer(set *collector.Set, self selfCollectors) func(ctx context.Context) ([]*dto.MetricFamily, error) {
	return func(ctx context.Context) ([]*dto.MetricFamily, error) {
		goRuntime := prometheus.NewRegistry()
		if self.goRuntime != nil {
			goRuntime.MustRegister(self.goRuntime)
		}
		goFamilies, goErr := goRuntime.Gather()
		rest := prometheus.NewRegistry()
		rest.MustRegister(self.rest...)
		rest.MustRegister(set.Scrape(ctx))
		mfs, err := rest.Gather()
		mfs = append(mfs, goFamilies...)
		slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
		return mfs, errors.Join(goErr, err)
	}
}

// exposer encodes what gather returns, as promhttp's handler does with
// ContinueOnError: a gather error is logged and what was gathered is
// served. The counters created at run time carry their created timestamp:
// OpenMetrics serves it as _created, the protobuf format Prometheus asks
// for with created-timestamp-zero-ingestion as created_timestamp; the
// classic text format, which has no place for it, stays as it was. It is
// written here rather than left to promhttp because the monitor encodes
// and the server only sends: promhttp does both in one handler.
func exposer(gather func(ctx context.Context) ([]*dto.MetricFamily, error), logger *slog.Logger) privsep.ExposeFunc {
	return func(ctx context.Context, format expfmt.Format) ([]byte, error) {
		mfs, err := gather(ctx)
		if err != nil {
			logger.Error("error gathering metrics", "err", err)
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, format, expfmt.WithCreatedLines())
		for _, mf := range mfs {
			if eerr := enc.Encode(mf); eerr != nil {
				logger.Error("error encoding metric family", "family", mf.GetName(), "err", eerr)
			}
		}
		if closer, ok := enc.(expfmt.Closer); ok {
			if cerr := closer.Close(); cerr != nil {
				logger.Error("error closing the exposition", "err", cerr)
			}
		}
		return buf.Bytes(), err
	}
}

// local exposes in this process.
func local(expose privsep.ExposeFunc) exposeFunc {
	return func(ctx context.Context, timeout time.Duration, format expfmt.Format) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return expose(ctx, format)
	}
}

// serveMux serves the metrics at metricsPath and a landing page at /.
func serveMux(expose exposeFunc, opts webOptions, logger *slog.Logger) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	mux.Handle(opts.metricsPath, metricsHandler(expose, logger, opts.maxRequests, opts.defaultTimeout))
	if opts.metricsPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        program,
			Description: "XDP, NAPI, NIC and CPU telemetry for Prometheus",
			Version:     version.Info(),
			Links:       []web.LandingLinks{{Address: opts.metricsPath, Text: "Metrics"}},
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", landing)
	}
	return mux, nil
}

// serveOn serves on listeners until the server fails or end is closed; it
// returns the exit code.
func serveOn(listeners []net.Listener, opts webOptions, expose exposeFunc, end <-chan struct{}, logger *slog.Logger) int {
	mux, err := serveMux(expose, opts, logger)
	if err != nil {
		logger.Error("building landing page", "err", err)
		return 1
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- web.ServeMultiple(listeners, server, opts.flags, logger) }()
	select {
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Error("cannot serve", "err", err)
			return 1
		}
	case <-end:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := server.Shutdown(ctx); err != nil {
		logger.Error("shutting down web server", "err", err)
	}
	return 0
}

// signalled is closed when SIGINT or SIGTERM asks the exporter to stop.
func signalled(logger *slog.Logger) <-chan struct{} {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	end := make(chan struct{})
	go func() {
		logger.Info("shutting down", "signal", (<-stop).String())
		close(end)
	}()
	return end
}

// selfCollectors are the exporter's own metrics: the Go runtime's, which
// gatherer gathers first, and the process's and build information.
type selfCollectors struct {
	goRuntime prometheus.Collector
	rest      []prometheus.Collector
}

func processCollectors() selfCollectors {
	return selfCollectors{
		goRuntime: collectors.NewGoCollector(),
		rest: []prometheus.Collector{
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			versioncollector.NewCollector(program),
		},
	}
}

// metricsHandler gathers the collectors afresh for every request, bounded by
// the scrape timeout Prometheus announces (minus a little for the transfer),
// so a hung source cannot hold the scrape past the point Prometheus gives up.
// It negotiates the format as promhttp does with OpenMetrics enabled, and
// answers a gather that failed with nothing gathered as promhttp does.
func metricsHandler(expose exposeFunc, logger *slog.Logger, maxRequests int, defaultTimeout time.Duration) http.Handler {
	// The in-flight limit lives here, not in the monitor: the monitor
	// refuses requests beyond the same limit, which the server then never
	// sends.
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
		format := expfmt.NegotiateAccept(r.Header, privsep.Formats...)
		body, err := expose(r.Context(), timeout, format)
		if err != nil && len(body) == 0 {
			logger.Error("serving metrics", "err", err)
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Add("Vary", "Accept")
		w.Header().Set("Content-Type", string(format))
		cw, finish := compressed(w, r)
		defer finish()
		if _, err := cw.Write(body); err != nil {
			logger.Debug("sending metrics", "err", err)
		}
	})
}
