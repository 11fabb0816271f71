package dashboards

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

func amtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("amtool")
	if err != nil {
		testenv.Unavailable(t, "amtool not installed (apt-get install prometheus-alertmanager)")
	}
	return p
}

// alertmanagerFile writes the generated Alertmanager configuration of cfg
// with the repository's templates, and returns its path.
func alertmanagerFile(t *testing.T, cfg Config) string {
	t.Helper()
	tmpl, err := filepath.Abs("../deploy/alertmanager/xdp.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Alertmanager.Templates = tmpl
	files, err := Alertmanager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(path, files["deploy/alertmanager/alertmanager.yml"], 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// allAlerts are the alerts of both tiers.
func allAlerts(cfg Config) []Rule {
	var out []Rule
	for _, f := range []RuleFile{AlertingRules(cfg), GlobalRules(cfg)} {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// TestAlertmanagerCheckConfig: amtool accepts the generated configuration
// with its templates loaded.
func TestAlertmanagerCheckConfig(t *testing.T) {
	out, err := exec.Command(amtool(t), "check-config", alertmanagerFile(t, DefaultConfig())).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 templates") {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
}

// TestAlertRoutes: every alert of both tiers reaches the receiver of its
// severity, by amtool's reading of the routing tree.
func TestAlertRoutes(t *testing.T) {
	bin, cfg := amtool(t), DefaultConfig()
	file := alertmanagerFile(t, cfg)
	receiver := map[string]string{}
	for _, s := range severityReceiver {
		receiver[s.severity] = s.receiver
	}
	for _, a := range allAlerts(cfg) {
		sev := a.Labels["severity"]
		want, ok := receiver[sev]
		if !ok {
			t.Errorf("%s: severity %q has no route", a.Alert, sev)
			continue
		}
		out, err := exec.Command(bin, "config", "routes", "test", "--config.file="+file, "--verify.receivers="+want,
			"alertname="+a.Alert, "severity="+sev, "cluster=dc1", "job=xdp", "instance=host1").CombinedOutput()
		if err != nil {
			t.Errorf("%s (%s) does not reach %s: %v\n%s", a.Alert, sev, want, err, out)
		}
	}
	// Another team's alert reaches the root's receiver, not the XDP ones.
	if out, err := exec.Command(bin, "config", "routes", "test", "--config.file="+file, "--verify.receivers="+ReceiverNone,
		"alertname=NodeDown", "severity=critical").CombinedOutput(); err != nil {
		t.Errorf("a foreign critical alert: %v\n%s", err, out)
	}
}

// TestInhibitorsFireFirst: an inhibition holds only while its source
// fires, and Alertmanager notifies a target group_wait after it fires, so
// every source alert's for: is shorter than its targets'. Sources that
// mean the host is gone are exempt: their targets' series stop, and the
// targets resolve.
func TestInhibitorsFireFirst(t *testing.T) {
	cfg := DefaultConfig()
	forOf := map[string]time.Duration{}
	for _, a := range allAlerts(cfg) {
		d := time.Duration(0)
		if a.For != "" {
			md, err := model.ParseDuration(a.For)
			if err != nil {
				t.Fatalf("%s: for %q: %v", a.Alert, a.For, err)
			}
			d = time.Duration(md)
		}
		forOf[a.Alert] = d
	}
	for _, ir := range InhibitRules(cfg) {
		for _, s := range ir.SourceAlerts {
			if _, ok := forOf[s]; !ok {
				t.Errorf("inhibition source %s is no alert", s)
			}
			for _, target := range ir.TargetAlerts {
				if _, ok := forOf[target]; !ok {
					t.Errorf("inhibition target %s is no alert", target)
				}
				if !ir.Gone && forOf[s] >= forOf[target] {
					t.Errorf("%s (for %v) inhibits %s (for %v): it must fire first", s, forOf[s], target, forOf[target])
				}
			}
		}
	}
}

// TestEveryAlertHasAction: the one-line first step the notifications
// carry, for every alert.
func TestEveryAlertHasAction(t *testing.T) {
	for _, a := range allAlerts(DefaultConfig()) {
		act := a.Annotations["action"]
		if act == "" || strings.Contains(act, "\n") || len(act) > 160 {
			t.Errorf("%s: action %q: want one line of at most 160 characters", a.Alert, act)
		}
	}
}

// at is an alert as Prometheus posts it to Alertmanager.
func at(labels map[string]string, annotations map[string]string) promtest.PostedAlert {
	return promtest.PostedAlert{Labels: labels, Annotations: annotations, StartsAt: time.Now().Add(-time.Minute)}
}

func alertLabels(name, severity string, kv ...string) map[string]string {
	m := map[string]string{"alertname": name, "severity": severity, "job": "xdp"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestAlertmanagerInhibits runs the real Alertmanager on the generated
// configuration (its receivers pointed at a webhook in the test) and
// posts the alerts of four incidents at once: a fleet-wide drop in dc1
// with two of its hosts' own alerts and a host of the same name in dc2,
// an exporter down with another alert of its host, an uncorrectable AER
// error with the link degradation of its device and of another device,
// and the edge's and the global tier's alert for one device of a third
// cluster. Exactly the
// notifications a person should get arrive, each once, on the receiver
// of its severity; the info alert reaches none.
func TestAlertmanagerInhibits(t *testing.T) {
	hook := promtest.StartWebhook(t)
	cfg := DefaultConfig()
	cfg.Alertmanager.PageURL, cfg.Alertmanager.TicketURL = hook.URL+"/page", hook.URL+"/ticket"
	cfg.Alertmanager.GroupWait, cfg.Alertmanager.GroupInterval = "1s", "1s"
	am := promtest.StartAlertmanager(t, alertmanagerFile(t, cfg))

	host := func(name, cluster, instance, device string) map[string]string {
		return alertLabels(name, "warning", "cluster", cluster, "instance", instance, "device", device)
	}
	am.Post(t, []promtest.PostedAlert{
		at(alertLabels(AlertFleetWideDrops, "critical", "cluster", "dc1"), nil),
		at(host(AlertNICDropsWhileIdle, "dc1", "a", "eth0"), nil),
		at(host(AlertNICDropsWhileIdle, "dc1", "b", "eth0"), nil),
		at(host(AlertRxOutOfBuffer, "dc1", "b", "eth0"), nil),
		at(host(AlertNICDropsWhileIdle, "dc2", "a", "eth0"), nil),
		at(alertLabels(AlertExporterDown, "warning", "cluster", "dc1", "instance", "c"), nil),
		at(host(AlertRSSImbalance, "dc1", "c", "eth1"), nil),
		at(alertLabels(AlertPCIeAERUncorr, "critical", "cluster", "dc1", "instance", "d", "device", "eth0", "class", "fatal"), nil),
		at(host(AlertPCIeLinkDegraded, "dc1", "d", "eth0"), nil),
		at(host(AlertPCIeLinkDegraded, "dc1", "d", "eth1"), nil),
		at(host(AlertNICDropsWhileIdle, "dc3", "e", "eth0"), nil),
		at(host(AlertFleetHostDrops, "dc3", "e", "eth0"), nil),
		at(alertLabels(AlertCollectorFailing, "info", "cluster", "dc1", "instance", "a", "collector", "perf"), nil),
	})
	want := []string{
		"/page " + AlertFleetWideDrops + " dc1 ",
		"/page " + AlertPCIeAERUncorr + " dc1 d",
		"/ticket " + AlertExporterDown + " dc1 c",
		"/ticket " + AlertNICDropsWhileIdle + " dc2 a",
		"/ticket " + AlertNICDropsWhileIdle + " dc3 e",
		"/ticket " + AlertPCIeLinkDegraded + " dc1 d",
	}
	// Every group is flushed after group_wait (1 s); wait for the last
	// expected one, then as long again for any that should not come.
	var got []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if got = notified(hook); len(got) >= len(want) {
			break
		}
	}
	time.Sleep(3 * time.Second)
	got = notified(hook)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("notifications:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, n := range hook.Notifications() {
		if n.GroupLabels["alertname"] == AlertPCIeLinkDegraded {
			if len(n.Alerts) != 1 || n.Alerts[0].Labels["device"] != "eth1" {
				b, _ := json.Marshal(n.Alerts)
				t.Errorf("%s: want the other device's alert alone: %s", AlertPCIeLinkDegraded, b)
			}
		}
	}
}

// notified lists the notifications as "path alertname cluster instance",
// one per group and status.
func notified(hook *promtest.Webhook) []string {
	var out []string
	for _, n := range hook.Notifications() {
		out = append(out, strings.Join([]string{n.Path, n.GroupLabels["alertname"], n.GroupLabels["cluster"], n.GroupLabels["instance"]}, " "))
	}
	return out
}

// TestNotificationTemplate renders xdp.text and xdp.title with amtool over
// the data of a firing host alert and a fleet alert: the host, device,
// the measured figures, the first step and the runbook come out.
func TestNotificationTemplate(t *testing.T) {
	bin := amtool(t)
	cfg := DefaultConfig()
	byName := map[string]Rule{}
	for _, a := range allAlerts(cfg) {
		byName[a.Alert] = a
	}
	nic := byName[AlertNICDropsWhileIdle]
	data := map[string]any{
		"receiver": ReceiverTicket, "status": "firing",
		"groupLabels":  map[string]string{"alertname": AlertNICDropsWhileIdle, "cluster": "dc1", "job": "xdp", "instance": "host1"},
		"commonLabels": map[string]string{"alertname": AlertNICDropsWhileIdle, "cluster": "dc1", "job": "xdp", "instance": "host1", "severity": "warning"},
		"alerts": []map[string]any{{
			"status": "firing",
			"labels": map[string]string{"alertname": AlertNICDropsWhileIdle, "cluster": "dc1", "job": "xdp", "instance": "host1", "device": "eth3", "severity": "warning"},
			"annotations": map[string]string{
				"summary":     "eth3 on host1 drops packets for lack of host resources while its RX CPUs are idle",
				"description": "The NIC drops 13.76M packets/s for lack of host resources (rx_discards_phy (port, ethtool)) out of 88.05M packets/s",
				"action":      nic.Annotations["action"], "runbook_url": nic.Annotations["runbook_url"],
			},
		}},
	}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	render := func(name string) string {
		out, err := exec.Command(bin, "template", "render", "--template.glob=../deploy/alertmanager/xdp.tmpl",
			`--template.text={{ template "`+name+`" . }}`, "--template.data="+path).CombinedOutput()
		if err != nil {
			t.Fatalf("amtool template render %s: %v\n%s", name, err, out)
		}
		return string(out)
	}
	if title := render("xdp.title"); !strings.Contains(title, "[FIRING:1] "+AlertNICDropsWhileIdle+" dc1/xdp on host1") {
		t.Errorf("xdp.title: %q", title)
	}
	text := render("xdp.text")
	for _, want := range []string{"Host: host1, device eth3, cluster dc1", "13.76M packets/s", "Fix: " + nic.Annotations["action"],
		"Runbook: " + nic.Annotations["runbook_url"]} {
		if !strings.Contains(text, want) {
			t.Errorf("xdp.text lacks %q:\n%s", want, text)
		}
	}
}
