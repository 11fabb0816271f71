package promtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// Alertmanager is a running Alertmanager (Debian's
// prometheus-alertmanager), clustering off, on a free port.
type Alertmanager struct {
	URL  string
	Addr string // host:port, for a Prometheus' alerting.alertmanagers
}

// StartAlertmanager runs Alertmanager with the configuration file cfgPath
// and stops it when the test ends.
func StartAlertmanager(t testing.TB, cfgPath string) *Alertmanager {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		testenv.Unavailable(t, "prometheus-alertmanager not installed (apt-get install prometheus-alertmanager)")
		return nil
	}
	dir := t.TempDir()
	addr := exportertest.FreeAddr(t)
	startDaemon(t, dir, "alertmanager", exec.Command(bin, "--config.file="+cfgPath, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn"))
	am := &Alertmanager{URL: "http://" + addr, Addr: addr}
	waitReady(t, am.URL)
	return am
}

// PostedAlert is an alert as Alertmanager's API v2 takes it.
type PostedAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt,omitempty"`
}

// Post sends alerts to Alertmanager as Prometheus does.
func (am *Alertmanager) Post(t testing.TB, alerts []PostedAlert) {
	t.Helper()
	b, err := json.Marshal(alerts)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(am.URL+"/api/v2/alerts", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/v2/alerts: HTTP %d: %s", resp.StatusCode, body)
	}
}

// ActiveAlert is an alert Alertmanager holds, with whether it is
// suppressed and by which alerts' fingerprints.
type ActiveAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// Alerts returns the alerts Alertmanager holds (API v2).
func (am *Alertmanager) Alerts(t testing.TB) []ActiveAlert {
	t.Helper()
	resp, err := http.Get(am.URL + "/api/v2/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []ActiveAlert
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET /api/v2/alerts: %v", err)
	}
	return out
}

// Notification is one webhook message: Alertmanager's template data (the
// receiver, status, the group's alerts and labels), as JSON.
type Notification struct {
	Path         string            `json:"-"` // the webhook URL's path: which receiver
	Raw          []byte            `json:"-"`
	Receiver     string            `json:"receiver"`
	Status       string            `json:"status"`
	GroupLabels  map[string]string `json:"groupLabels"`
	CommonLabels map[string]string `json:"commonLabels"`
	Alerts       []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
}

// Webhook is a webhook receiver inside the test: it records every
// notification Alertmanager sends it.
type Webhook struct {
	URL string
	mu  sync.Mutex
	got []Notification
}

// StartWebhook serves a webhook receiver until the test ends.
func StartWebhook(t testing.TB) *Webhook {
	t.Helper()
	w := &Webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var n Notification
		if err == nil {
			err = json.Unmarshal(b, &n)
		}
		if err != nil {
			t.Errorf("webhook %s: %v: %s", r.URL.Path, err, b)
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		n.Path, n.Raw = r.URL.Path, b
		w.mu.Lock()
		w.got = append(w.got, n)
		w.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	w.URL = srv.URL
	return w
}

// Notifications returns what the receiver got so far.
func (w *Webhook) Notifications() []Notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// WaitFor waits up to d for a notification that ok accepts and returns
// it, or false.
func (w *Webhook) WaitFor(d time.Duration, ok func(Notification) bool) (Notification, bool) {
	for deadline := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		for _, n := range w.Notifications() {
			if ok(n) {
				return n, true
			}
		}
		if time.Now().After(deadline) {
			return Notification{}, false
		}
	}
}
