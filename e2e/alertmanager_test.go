package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/dashboards"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// alertingConfig is the shipped configuration with durations a test can
// wait for, in the shipped order (the inhibitors fire first), the drop
// floor of fleetRules, and Alertmanager's receivers posting to the test's
// webhook.
func alertingConfig(hook string) dashboards.Config {
	cfg := dashboards.DefaultConfig()
	cfg.NICDropsWhileIdle.MinDiscards = 100
	cfg.NICDropsWhileIdle.For = "20s"
	cfg.Global.HostDrops.For = "40s"
	cfg.Global.FleetWideDrops.For, cfg.Global.FleetWideDrops.KeepFiringFor = "5s", "30s"
	a := &cfg.Alertmanager
	a.PageURL, a.TicketURL = hook+"/page", hook+"/ticket"
	a.GroupWait, a.GroupInterval, a.RepeatInterval = "5s", "5s", "1h"
	return cfg
}

// writeAlerting writes cfg's rule files and Alertmanager configuration
// (with the repository's templates) into a directory and returns it.
func writeAlerting(t *testing.T, cfg dashboards.Config) string {
	t.Helper()
	dir := t.TempDir()
	tmpl, err := filepath.Abs("../deploy/alertmanager/xdp.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Alertmanager.Templates = tmpl
	files, err := dashboards.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	am, err := dashboards.Alertmanager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	files["alertmanager.yml"] = am["deploy/alertmanager/alertmanager.yml"]
	for name, path := range map[string]string{"rules/recording.yml": "recording.yml", "rules/alerts.yml": "alerts.yml",
		"rules/global.yml": "global.yml", "alertmanager.yml": "alertmanager.yml"} {
		if err := os.WriteFile(filepath.Join(dir, path), files[name], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// loadInTurns gives the hosts of turns the lab notes' case in turns of
// period each, the others a trickle: two hosts bursting at once compete
// for the two CPUs (in two of three runs one host's drops came and went),
// while in turns each drops as one host alone does, at half its rate over
// the rules' one-minute window. The returned function stops them.
func loadInTurns(t *testing.T, hosts []fleetHost, turns []int, period time.Duration) func() {
	var quiet []fleetHost
	for i, h := range hosts {
		if !slices.Contains(turns, i) {
			quiet = append(quiet, h)
		}
	}
	stopQuiet := load(t, quiet, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for turn := 0; ; turn++ {
			h := hosts[turns[turn%len(turns)]]
			slot, end := context.WithTimeout(ctx, period)
			err := send(slot, h.pair, burstRate, burstFrames, []int{0, 1})
			end()
			if err != nil || ctx.Err() != nil {
				done <- err
				return
			}
		}
	}()
	return sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("generator in turns: %v", err)
		}
		stopQuiet()
	})
}

// describe lists notifications as "path status alertname cluster
// instance/devices".
func describe(ns []promtest.Notification) string {
	var out []string
	for _, n := range ns {
		var devices []string
		for _, a := range n.Alerts {
			devices = append(devices, a.Labels["device"])
		}
		out = append(out, fmt.Sprintf("%s %s %s %s %s/%s", n.Path, n.Status, n.GroupLabels["alertname"], n.GroupLabels["cluster"],
			n.GroupLabels["instance"], strings.Join(devices, ",")))
	}
	return strings.Join(out, "\n  ")
}

// TestAlertmanagerNotifications runs what an operator runs: the real
// exporters on four hosts (dc1: three, behind two edge Prometheus
// servers; dc2: one, behind a third), the edge rules at the edges, the
// global tier receiving their remote write, and the real Alertmanager
// with the generated configuration, receiving the alerts of all four
// Prometheus servers and posting to a webhook in the test.
//
// The lab notes' case (NIC drops while the RX CPUs idle) at one host
// gives exactly one notification, a warning with the host, device,
// figures, first step and runbook, and one resolved message when the
// load stops: the global tier's alert for the same device never notifies.
// The same case at two of dc1's three hosts gives one XDPFleetWideDrops
// page for dc1 and no per-host notification, while it lasts and while it
// ends.
func TestAlertmanagerNotifications(t *testing.T) {
	testenv.Privileged(t)
	if _, err := exec.LookPath("prometheus"); err != nil {
		testenv.Unavailable(t, "prometheus not installed (apt-get install prometheus)")
	}
	hook := promtest.StartWebhook(t)
	cfg := alertingConfig(hook.URL)
	dir := writeAlerting(t, cfg)
	am := promtest.StartAlertmanager(t, filepath.Join(dir, "alertmanager.yml"))

	hosts := startFleet(t, 4)
	global := promtest.StartConfig(t, promtest.Place(t, "../deploy/prometheus/global.yml",
		promtest.Placement{Interval: time.Second, RuleDir: dir, Alertmanager: am.Addr}), "--web.enable-remote-write-receiver")
	edge := func(cluster, name string, hs ...fleetHost) {
		var targets []string
		for _, h := range hs {
			targets = append(targets, h.addr)
		}
		promtest.StartConfig(t, promtest.Place(t, "../deploy/prometheus/edge.yml", promtest.Placement{
			Targets: targets, Interval: time.Second, RuleDir: dir, Alertmanager: am.Addr,
			ExternalLabels: map[string]string{"cluster": cluster, "prometheus": name}, WriteURL: global.WriteURL()}))
	}
	edge("dc1", "rack1", hosts[0], hosts[1])
	edge("dc1", "rack2", hosts[2])
	edge("dc2", "rack3", hosts[3])
	waitFor(t, global, `count(up{job="xdp"} == 1) == 4`)

	t.Run("one host", func(t *testing.T) { oneHostIncident(t, hook, global, hosts) })
	if t.Failed() {
		return
	}
	t.Run("two of three hosts", func(t *testing.T) { fleetIncident(t, hook, am, global, hosts) })
}

// notifies selects the notifications of alertname's group with status
// (firing, resolved).
func notifies(alertname, status string) func(promtest.Notification) bool {
	return func(n promtest.Notification) bool {
		return n.GroupLabels["alertname"] == alertname && n.Status == status
	}
}

// oneHostIncident: the lab notes' case at dc1's first host.
func oneHostIncident(t *testing.T, hook *promtest.Webhook, global *promtest.Server, hosts []fleetHost) {
	stop := load(t, hosts, map[int]float64{0: burstRate})
	defer stop()
	isDrop := func(status string) func(promtest.Notification) bool {
		return notifies(dashboards.AlertNICDropsWhileIdle, status)
	}
	firing, ok := hook.WaitFor(150*time.Second, isDrop("firing"))
	if !ok {
		logGlobal(t, global)
		t.Fatalf("no notification of %s in 150 s; got:\n  %s", dashboards.AlertNICDropsWhileIdle, describe(hook.Notifications()))
	}
	// Long enough for the global tier's alert of the device (for: 40 s)
	// to have notified, were it going to.
	time.Sleep(50 * time.Second)
	if got := hook.Notifications(); len(got) != 1 {
		t.Errorf("%d notifications while one host drops, want 1:\n  %s", len(got), describe(got))
	}
	checkHostNotification(t, firing, hosts[0])
	stop()

	resolved, ok := hook.WaitFor(150*time.Second, isDrop("resolved"))
	if !ok {
		t.Fatalf("no resolved notification in 150 s after the load stopped; got:\n  %s", describe(hook.Notifications()))
	}
	time.Sleep(10 * time.Second)
	if got := hook.Notifications(); len(got) != 2 {
		t.Errorf("%d notifications for the one-host incident, want the firing and the resolved one:\n  %s", len(got), describe(got))
	}
	if resolved.Path != "/ticket" || resolved.GroupLabels["instance"] != hosts[0].instance {
		t.Errorf("resolved: %s", describe([]promtest.Notification{resolved}))
	}
	t.Logf("one host: %s", describe(hook.Notifications()))
}

// checkHostNotification: the notification is the ticket of one alert of
// the host's device, and xdp.tmpl renders its data (amtool, the real
// Alertmanager's template engine) with the host, device, figures, first
// step and runbook.
func checkHostNotification(t *testing.T, n promtest.Notification, h fleetHost) {
	t.Helper()
	if n.Path != "/ticket" || len(n.Alerts) != 1 {
		t.Fatalf("want one alert on the ticket receiver: %s", describe([]promtest.Notification{n}))
	}
	a := n.Alerts[0]
	want := map[string]string{"instance": h.instance, "device": h.pair.Host.Name, "cluster": "dc1", "job": "xdp", "severity": "warning"}
	for k, v := range want {
		if a.Labels[k] != v {
			t.Errorf("label %s=%q, want %q (labels %v)", k, a.Labels[k], v, a.Labels)
		}
	}
	if !strings.HasSuffix(a.Annotations["runbook_url"], "#xdpnicdropswhilerxcpusidle") || a.Annotations["action"] == "" {
		t.Errorf("annotations %v: want the runbook and the action", a.Annotations)
	}
	t.Logf("notification: labels %v, runbook %s", a.Labels, a.Annotations["runbook_url"])
	data := filepath.Join(t.TempDir(), "notification.json")
	if err := os.WriteFile(data, n.Raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("amtool", "template", "render", "--template.glob=../deploy/alertmanager/xdp.tmpl",
		`--template.text={{ template "xdp.title" . }}`+"\n"+`{{ template "xdp.text" . }}`, "--template.data="+data).CombinedOutput()
	if err != nil {
		t.Fatalf("amtool template render: %v\n%s", err, out)
	}
	text := string(out)
	for _, w := range []string{"Host: " + h.instance + ", device " + h.pair.Host.Name, "packets/s for lack of host resources",
		"Fix: " + a.Annotations["action"], "Runbook: " + a.Annotations["runbook_url"]} {
		if !strings.Contains(text, w) {
			t.Errorf("the rendered notification lacks %q:\n%s", w, text)
		}
	}
	t.Logf("rendered:\n%s", text)
}

// fleetIncident: the case at two of dc1's three hosts at once.
func fleetIncident(t *testing.T, hook *promtest.Webhook, am *promtest.Alertmanager, global *promtest.Server, hosts []fleetHost) {
	before := len(hook.Notifications())
	since := func() []promtest.Notification { return hook.Notifications()[before:] }
	stop := loadInTurns(t, hosts, []int{0, 1}, 2*time.Second)
	defer stop()
	isFleet := func(status string) func(promtest.Notification) bool {
		return notifies(dashboards.AlertFleetWideDrops, status)
	}
	page, ok := hook.WaitFor(150*time.Second, isFleet("firing"))
	if !ok {
		logGlobal(t, global)
		t.Fatalf("no %s page in 150 s; got:\n  %s", dashboards.AlertFleetWideDrops, describe(since()))
	}
	if page.Path != "/page" || page.GroupLabels["cluster"] != "dc1" || len(page.Alerts) != 1 {
		t.Errorf("page: %s", describe([]promtest.Notification{page}))
	}
	// The hosts' own alerts (for: 20 s) have fired by now: Alertmanager
	// holds them, inhibited.
	time.Sleep(50 * time.Second)
	inhibited := map[string]bool{}
	for _, a := range am.Alerts(t) {
		if a.Labels["alertname"] == dashboards.AlertNICDropsWhileIdle && a.Labels["cluster"] == "dc1" {
			t.Logf("%s %s: %s, inhibited by %v", a.Labels["alertname"], a.Labels["instance"], a.Status.State, a.Status.InhibitedBy)
			inhibited[a.Labels["instance"]] = a.Status.State == "suppressed" && len(a.Status.InhibitedBy) > 0
		}
	}
	if !inhibited[hosts[0].instance] || !inhibited[hosts[1].instance] {
		logGlobal(t, global)
		t.Errorf("want both dropping hosts' %s held and inhibited: %v", dashboards.AlertNICDropsWhileIdle, inhibited)
	}
	stop()
	if _, ok := hook.WaitFor(180*time.Second, isFleet("resolved")); !ok {
		t.Errorf("no resolved page in 180 s after the load stopped")
	}
	time.Sleep(10 * time.Second)
	got := since()
	if len(got) != 2 {
		t.Errorf("%d notifications for the fleet incident, want the page and its resolution:\n  %s", len(got), describe(got))
	}
	t.Logf("two of three hosts: %s", describe(got))
}

// logGlobal logs the series the drop alerts read, at the global tier.
func logGlobal(t *testing.T, global *promtest.Server) {
	for _, q := range []string{"instance_device:xdp_nic_rx_host_drops:rate1m", "instance:xdp_rx_cpus_idle:avg_ratio",
		"job:xdp_hosts_dropping_while_rx_idle:count", `ALERTS{alertstate="firing"}`} {
		v, err := global.Query(context.Background(), q)
		t.Logf("at the global tier: %s = %v (%v)", q, v, err)
	}
}
