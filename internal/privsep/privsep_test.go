package privsep

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// socketPair is the two ends of a Unix stream socket pair, as the exporter
// makes them.
func socketPair(t *testing.T) (monitorEnd, serverEnd *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "monitor"), os.NewFile(uintptr(fds[1]), "server")
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// families gathers a registry holding a counter with a created timestamp
// and a histogram, the kinds the exporter serves.
func families(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdp_test_total", Help: "A counter."}, []string{"device"})
	c.WithLabelValues("eth0").Add(3)
	c.WithLabelValues("eth1").Add(5)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "xdp_test_bulk", Help: "A histogram.", Buckets: []float64{1, 8, 64}})
	h.Observe(7)
	reg.MustRegister(c, h)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// start runs a Monitor on one end and a Client on the other.
func start(t *testing.T, expose ExposeFunc, limit int) (*Client, *os.File, *exportertest.Log) {
	t.Helper()
	mon, srv := socketPair(t)
	log := &exportertest.Log{}
	m := &Monitor{Expose: expose, Limit: limit, Logger: slog.New(slog.NewTextHandler(log, nil))}
	served := make(chan error, 1)
	go func() { served <- m.Serve(mon) }()
	c := NewClient(srv, slog.New(slog.NewTextHandler(log, nil)))
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return c, srv, log
}

// encode is the exposition of mfs in format.
func encode(t *testing.T, mfs []*dto.MetricFamily, format expfmt.Format) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format, expfmt.WithCreatedLines())
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestExposeRoundTrip: for every format a scrape may negotiate, with and
// without an escaping scheme, the monitor encodes in the format the server
// asked for, and the server gets its bytes unchanged, within the request's
// deadline.
func TestExposeRoundTrip(t *testing.T) {
	mfs := families(t)
	var deadline time.Duration
	c, _, _ := start(t, func(ctx context.Context, format expfmt.Format) ([]byte, error) {
		d, _ := ctx.Deadline()
		deadline = time.Until(d)
		return encode(t, mfs, format), nil
	}, 0)
	for _, base := range Formats {
		for _, format := range []expfmt.Format{base, base + "; escaping=underscores", base + "; escaping=allow-utf-8"} {
			got, err := c.Expose(context.Background(), 7*time.Second, format)
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			if want := encode(t, mfs, format); !bytes.Equal(got, want) {
				t.Errorf("%s:\n got %q\nwant %q", format, got, want)
			}
		}
	}
	if deadline <= 6*time.Second || deadline > 7*time.Second {
		t.Errorf("the monitor's deadline was %v away, want the request's 7s", deadline)
	}
	if _, err := c.Expose(context.Background(), time.Second, "application/json"); err == nil {
		t.Error("a format outside Formats was sent")
	}
}

// TestExposeError: a gather that fails in part sends what it has and the
// error, as a registry's Gather does.
func TestExposeError(t *testing.T) {
	c, _, _ := start(t, func(context.Context, expfmt.Format) ([]byte, error) {
		return []byte("xdp_test_total 3\n"), errors.New("collected metric xdp_test_total was collected before")
	}, 0)
	got, err := c.Expose(context.Background(), time.Second, expfmt.FmtText)
	if err == nil || !strings.Contains(err.Error(), "collected before") {
		t.Errorf("error %v, want the gather's", err)
	}
	if string(got) != "xdp_test_total 3\n" {
		t.Errorf("body %q, want what was gathered", got)
	}
}

// TestConcurrentAnswersOutOfOrder: answers find their requests by id, so
// a slow exposition does not hold a fast one, and neither gets the
// other's.
func TestConcurrentAnswersOutOfOrder(t *testing.T) {
	release := make(chan struct{})
	c, _, _ := start(t, func(ctx context.Context, _ expfmt.Format) ([]byte, error) {
		if d, _ := ctx.Deadline(); time.Until(d) > 30*time.Second {
			<-release
			return []byte("slow"), nil
		}
		return []byte("fast"), nil
	}, 0)
	slow := make(chan string, 1)
	go func() {
		body, err := c.Expose(context.Background(), 2*time.Minute, expfmt.FmtText)
		if err != nil {
			slow <- err.Error()
			return
		}
		slow <- string(body)
	}()
	fast, err := c.Expose(context.Background(), 10*time.Second, expfmt.FmtText)
	if err != nil {
		t.Fatal(err)
	}
	if string(fast) != "fast" {
		t.Errorf("the fast request got %q", fast)
	}
	close(release)
	if got := <-slow; got != "slow" {
		t.Errorf("the slow request got %q", got)
	}
}

// rawRequest writes a request frame of the given fields, as a server that
// does not follow the protocol might.
func rawRequest(t *testing.T, w io.Writer, magicValue, kind, id, timeoutMS uint32, format, escaping uint16) {
	t.Helper()
	b := make([]byte, requestSize)
	binary.LittleEndian.PutUint32(b[0:], magicValue)
	binary.LittleEndian.PutUint32(b[4:], kind)
	binary.LittleEndian.PutUint32(b[8:], id)
	binary.LittleEndian.PutUint32(b[12:], timeoutMS)
	binary.LittleEndian.PutUint16(b[16:], format)
	binary.LittleEndian.PutUint16(b[18:], escaping)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestRefusals: a request with a wrong magic, an unknown kind, a timeout
// of 0 or beyond MaxTimeout, or a format or escaping scheme outside the
// tables is answered with a refusal that names the reason, logged, and
// gathers nothing; a valid request after them is answered, so the stream
// stays in step.
func TestRefusals(t *testing.T) {
	mon, srv := socketPair(t)
	log := &exportertest.Log{}
	gathers := 0
	m := &Monitor{Expose: func(context.Context, expfmt.Format) ([]byte, error) {
		gathers++
		return nil, nil
	}, Logger: slog.New(slog.NewTextHandler(log, nil))}
	served := make(chan error, 1)
	go func() { served <- m.Serve(mon) }()

	cases := []struct {
		magic, kind, id, timeout uint32
		format, escaping         uint16
		reason                   string
	}{
		{0xdeadbeef, kindExpose, 11, 1000, 0, 0, "malformed request: magic 0xdeadbeef"},
		{magic, 7, 12, 1000, 0, 0, "unknown request kind 7"},
		{magic, kindExpose, 13, 0, 0, 0, "malformed request: timeout 0s"},
		{magic, kindExpose, 14, uint32(MaxTimeout/time.Millisecond) + 1, 0, 0, "malformed request: timeout 1h0m0.001s"},
		{magic, kindExpose, 15, 1000, uint16(len(Formats)), 0, "malformed request: format 7 of 7"},
		{magic, kindExpose, 16, 1000, 0, 4, "malformed request: escaping scheme 4 of 4"},
	}
	for _, tc := range cases {
		rawRequest(t, srv, tc.magic, tc.kind, tc.id, tc.timeout, tc.format, tc.escaping)
		h, payload := readAnswer(t, srv)
		if h.id != tc.id || h.status != statusRefused || !strings.HasPrefix(string(payload), tc.reason) {
			t.Errorf("answer to %+v: id %d status %d %q, want a refusal of id %d: %q", tc, h.id, h.status, payload, tc.id, tc.reason)
		}
	}
	if gathers != 0 {
		t.Errorf("refused requests ran %d gathers", gathers)
	}
	rawRequest(t, srv, magic, kindExpose, 17, 1000, 0, 0)
	if h, _ := readAnswer(t, srv); h.id != 17 || h.status != statusExposed || gathers != 1 {
		t.Errorf("the valid request after the refusals: id %d status %d, %d gathers", h.id, h.status, gathers)
	}
	srv.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if n := strings.Count(log.String(), "refused a request from the HTTP server process"); n != len(cases) {
		t.Errorf("%d refusals logged, want %d:\n%s", n, len(cases), log)
	}
}

func readAnswer(t *testing.T, r io.Reader) (header, []byte) {
	t.Helper()
	hb := make([]byte, headerSize)
	if _, err := io.ReadFull(r, hb); err != nil {
		t.Fatal(err)
	}
	h, err := parseHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, h.length)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatal(err)
	}
	return h, payload
}

// TestLimit: beyond Limit gathers at once the monitor refuses, and the
// server's scrape says why.
func TestLimit(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	c, _, _ := start(t, func(context.Context, expfmt.Format) ([]byte, error) {
		close(started)
		<-release
		return nil, nil
	}, 1)
	first := make(chan error, 1)
	go func() {
		_, err := c.Expose(context.Background(), time.Minute, expfmt.FmtText)
		first <- err
	}()
	<-started
	_, err := c.Expose(context.Background(), time.Minute, expfmt.FmtText)
	if err == nil || !strings.Contains(err.Error(), "refused the request: 1 expositions already running") {
		t.Errorf("the second concurrent gather: %v, want a refusal", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the first gather: %v", err)
	}
}

// TestMonitorGone: when the monitor's end closes, waiting and later
// gathers fail at once and Done is closed with no error.
func TestMonitorGone(t *testing.T) {
	mon, srv := socketPair(t)
	c := NewClient(srv, slog.New(slog.DiscardHandler))
	mon.Close()
	<-c.Done()
	if err := c.Err(); err != nil {
		t.Errorf("Err after a clean close: %v", err)
	}
	if _, err := c.Expose(context.Background(), time.Second, expfmt.FmtText); err == nil {
		t.Error("a gather after the monitor left succeeded")
	}
}
