package main

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/collector"
)

// stuck is a collector that blocks in Update, ignoring ctx as a driver stuck
// in an ioctl would, until release is closed. It signals entered first.
type stuck struct {
	entered chan<- struct{}
	release <-chan struct{}
}

func (s stuck) Update(context.Context, *collector.LinkSnapshot, chan<- prometheus.Metric) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	<-s.release
	return nil
}

func (stuck) Close() error { return nil }

type nop struct{}

func (nop) Update(context.Context, *collector.LinkSnapshot, chan<- prometheus.Metric) error {
	return nil
}
func (nop) Close() error { return nil }

// serve runs one request through h and fails if it has not returned within
// a minute, which can only mean it waited for a collector that never ends.
func serve(t *testing.T, h http.Handler, header string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if header != "" {
		req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", header)
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { h.ServeHTTP(rec, req); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("scrape with X-Prometheus-Scrape-Timeout-Seconds=%q waited for the hung collector", header)
	}
	return rec
}

// TestHandlerScrapeTimeout: the timeout Prometheus announces bounds the
// scrape even when the configured default is an hour; a missing or
// malformed header falls back to the default.
func TestHandlerScrapeTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	set := collector.NewSet(map[string]collector.Collector{"hung": stuck{release: release}, "ok": nop{}}, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		name, header string
		def          time.Duration
	}{
		{"header", "0.5", time.Hour},
		{"no header", "", 300 * time.Millisecond},
		{"malformed header", "soon", 300 * time.Millisecond},
		{"negative header", "-3", 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(t, metricsHandler(local(exposer(gatherer(set, selfCollectors{}), slog.New(slog.DiscardHandler))), slog.New(slog.DiscardHandler), 0, tc.def), tc.header)
			body := rec.Body.String()
			if rec.Code != http.StatusOK {
				t.Fatalf("HTTP %d:\n%s", rec.Code, body)
			}
			for _, want := range []string{
				`xdp_scrape_collector_success{collector="hung"} 0`,
				`xdp_scrape_collector_success{collector="ok"} 1`,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("missing %s in:\n%s", want, body)
				}
			}
		})
	}
}

// TestHandlerInFlightLimit: --web.max-requests bounds concurrent scrapes
// across requests; the excess gets 503 and the slot frees when one ends.
func TestHandlerInFlightLimit(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	set := collector.NewSet(map[string]collector.Collector{"slow": stuck{entered: entered, release: release}}, slog.New(slog.DiscardHandler))
	h := metricsHandler(local(exposer(gatherer(set, selfCollectors{}), slog.New(slog.DiscardHandler))), slog.New(slog.DiscardHandler), 1, time.Hour)

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- serve(t, h, "") }()
	<-entered
	if rec := serve(t, h, ""); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("second concurrent scrape with --web.max-requests=1: HTTP %d, want 503", rec.Code)
	}
	close(release)
	if rec := <-first; rec.Code != http.StatusOK {
		t.Errorf("first scrape: HTTP %d", rec.Code)
	}
	go func() { <-entered }()
	if rec := serve(t, h, ""); rec.Code != http.StatusOK {
		t.Errorf("scrape after the first finished: HTTP %d, want 200", rec.Code)
	}
}

// TestHandlerGzip: a request that accepts gzip gets a gzip stream that
// Go's own reader decodes to the identity body's families; one that does
// not, or refuses it with q=0, gets identity.
func TestHandlerGzip(t *testing.T) {
	set := collector.NewSet(map[string]collector.Collector{"ok": nop{}}, slog.New(slog.DiscardHandler))
	h := metricsHandler(local(exposer(gatherer(set, processCollectors()), slog.New(slog.DiscardHandler))), slog.New(slog.DiscardHandler), 0, time.Minute)
	get := func(acceptEncoding string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("Accept-Encoding %q: HTTP %d", acceptEncoding, rec.Code)
		}
		return rec
	}
	families := func(body string) []string {
		var out []string
		for _, line := range strings.Split(body, "\n") {
			if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
				out = append(out, strings.Fields(name)[0])
			}
		}
		return out
	}
	plain := get("")
	if enc := plain.Header().Get("Content-Encoding"); enc != "" {
		t.Fatalf("no Accept-Encoding: Content-Encoding %q", enc)
	}
	want := families(plain.Body.String())
	if !slices.Contains(want, "xdp_scrape_collector_success") || !slices.Contains(want, "go_goroutines") {
		t.Fatalf("identity body lacks the exporter's families: %v", want)
	}
	for _, ae := range []string{"gzip", "deflate, gzip;q=0.5", "*", "GZIP"} {
		rec := get(ae)
		if enc := rec.Header().Get("Content-Encoding"); enc != "gzip" {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want gzip", ae, enc)
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatalf("Accept-Encoding %q: %v", ae, err)
		}
		body, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("Accept-Encoding %q: reading the gzip stream: %v", ae, err)
		}
		if got := families(string(body)); !slices.Equal(got, want) {
			t.Errorf("Accept-Encoding %q: families %v, identity has %v", ae, got, want)
		}
	}
	for _, ae := range []string{"gzip;q=0", "deflate", "identity"} {
		if enc := get(ae).Header().Get("Content-Encoding"); enc != "" {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want identity", ae, enc)
		}
	}
}
