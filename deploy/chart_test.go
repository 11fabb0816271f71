// Package deploy tests the deployment files: the Helm chart against the
// Kubernetes and Prometheus Operator API types, the plain manifests and
// the rules it carries.
package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chart = "helm/xdp-exporter"

// helm runs the helm command of go.mod's tool directive (helm.sh/helm/v4).
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "helm"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// rendered is the objects of one helm template run, decoded strictly into
// their API types (an unknown field fails).
type rendered struct {
	daemonSets      []appsv1.DaemonSet
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	serviceMonitors []monitoringv1.ServiceMonitor
	rules           []monitoringv1.PrometheusRule
	amConfigs       []monitoringv1alpha1.AlertmanagerConfig
}

// render runs helm template with the release name the plain manifests use
// and the given values files and --set values.
func render(t *testing.T, args ...string) rendered {
	t.Helper()
	out := helm(t, append([]string{"template", "xdp-exporter", chart}, args...)...)
	var r rendered
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // a document of comments only
		}
		switch head.Kind {
		case "DaemonSet":
			r.daemonSets = append(r.daemonSets, decode[appsv1.DaemonSet](t, doc))
		case "Service":
			r.services = append(r.services, decode[corev1.Service](t, doc))
		case "ConfigMap":
			r.configMaps = append(r.configMaps, decode[corev1.ConfigMap](t, doc))
		case "ServiceMonitor":
			r.serviceMonitors = append(r.serviceMonitors, decode[monitoringv1.ServiceMonitor](t, doc))
		case "PrometheusRule":
			r.rules = append(r.rules, decode[monitoringv1.PrometheusRule](t, doc))
		case "AlertmanagerConfig":
			r.amConfigs = append(r.amConfigs, decode[monitoringv1alpha1.AlertmanagerConfig](t, doc))
		default:
			t.Errorf("unexpected kind %s rendered", head.Kind)
		}
	}
	return r
}

// decode decodes one YAML document into T, rejecting unknown fields.
func decode[T any](t *testing.T, doc string) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
		t.Fatalf("%T: %v\n%.2000s", v, err, doc)
	}
	return v
}

// plain decodes a plain manifest of deploy/kubernetes.
func plain[T any](t *testing.T, name string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	return decode[T](t, string(b))
}

// TestChartLint lints the chart with its defaults and with every part on.
func TestChartLint(t *testing.T) {
	for _, args := range [][]string{nil, {"-f", "testdata/all-on.yaml"}} {
		out := helm(t, append([]string{"lint", "--strict", chart}, args...)...)
		if !bytes.Contains(out, []byte("0 chart(s) failed")) {
			t.Errorf("helm lint %v:\n%s", args, out)
		}
	}
}

// TestChartDefaultsArePlainManifests renders the chart's defaults (with
// the ServiceMonitor on) and holds the DaemonSet, Service and
// ServiceMonitor specs equal to deploy/kubernetes's: the plain manifests
// are the chart's defaults for kubectl users.
func TestChartDefaultsArePlainManifests(t *testing.T) {
	r := render(t, "--set", "serviceMonitor.enabled=true")
	if len(r.daemonSets) != 1 || len(r.services) != 1 || len(r.serviceMonitors) != 1 || len(r.rules) != 0 || len(r.configMaps) != 0 {
		t.Fatalf("defaults render %d DaemonSets, %d Services, %d ServiceMonitors, %d PrometheusRules, %d ConfigMaps; want 1, 1, 1, 0, 0",
			len(r.daemonSets), len(r.services), len(r.serviceMonitors), len(r.rules), len(r.configMaps))
	}
	ds := plain[appsv1.DaemonSet](t, "daemonset.yaml")
	if !reflect.DeepEqual(r.daemonSets[0].Spec, ds.Spec) || r.daemonSets[0].Name != ds.Name {
		t.Errorf("the chart's DaemonSet differs from kubernetes/daemonset.yaml:\nchart: %+v\nplain: %+v", r.daemonSets[0].Spec, ds.Spec)
	}
	svc := plain[corev1.Service](t, "service.yaml")
	if !reflect.DeepEqual(r.services[0].Spec, svc.Spec) {
		t.Errorf("the chart's Service differs from kubernetes/service.yaml:\nchart: %+v\nplain: %+v", r.services[0].Spec, svc.Spec)
	}
	sm := plain[monitoringv1.ServiceMonitor](t, "servicemonitor.yaml")
	if !reflect.DeepEqual(r.serviceMonitors[0].Spec, sm.Spec) {
		t.Errorf("the chart's ServiceMonitor differs from kubernetes/servicemonitor.yaml:\nchart: %+v\nplain: %+v", r.serviceMonitors[0].Spec, sm.Spec)
	}
}

// TestChartKeepsHardening renders every value set and checks that none
// loosens what the plain DaemonSet hardens: the container's security
// context, host network without a service account token or service
// links, and the probes on the metrics port.
func TestChartKeepsHardening(t *testing.T) {
	want := plain[appsv1.DaemonSet](t, "daemonset.yaml").Spec.Template.Spec
	r := render(t, "-f", "testdata/all-on.yaml")
	if len(r.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets rendered", len(r.daemonSets))
	}
	got := r.daemonSets[0].Spec.Template.Spec
	c, w := got.Containers[0], want.Containers[0]
	if !reflect.DeepEqual(c.SecurityContext, w.SecurityContext) {
		t.Errorf("security context %+v, want the plain manifest's %+v", c.SecurityContext, w.SecurityContext)
	}
	if !got.HostNetwork || got.AutomountServiceAccountToken == nil || *got.AutomountServiceAccountToken ||
		got.EnableServiceLinks == nil || *got.EnableServiceLinks || got.HostPID || got.DNSPolicy != want.DNSPolicy {
		t.Errorf("pod settings: hostNetwork %v, automountServiceAccountToken %v, enableServiceLinks %v, hostPID %v, dnsPolicy %s",
			got.HostNetwork, got.AutomountServiceAccountToken, got.EnableServiceLinks, got.HostPID, got.DNSPolicy)
	}
	for _, v := range got.Volumes {
		if v.Secret == nil {
			t.Errorf("volume %s is not the web config's Secret", v.Name)
		}
	}
	for _, arg := range []string{"--runtime.drop-capabilities", "--web.listen-address=:9740", "--web.config.file=/etc/xdp_exporter/web/web.yml",
		"--collector.rxq", "--collector.perf", "--no-collector.xsk", "--collector.rxq.observe"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	if p := c.ReadinessProbe.HTTPGet; p.Scheme != corev1.URISchemeHTTPS || p.Port.String() != "metrics" {
		t.Errorf("readiness probe %+v, want HTTPS on the metrics port with the web config's TLS", p)
	}
	if len(r.serviceMonitors) != 1 || r.serviceMonitors[0].Spec.Endpoints[0].Scheme == nil ||
		*r.serviceMonitors[0].Spec.Endpoints[0].Scheme != "https" || r.serviceMonitors[0].Spec.Endpoints[0].BasicAuth == nil {
		t.Errorf("the ServiceMonitor's endpoint does not scrape over HTTPS with basic auth: %+v", r.serviceMonitors)
	}
	checkDashboards(t, r.configMaps)
}

// checkDashboards holds the dashboard ConfigMaps to the generated
// dashboards: the run view and the fleet view, as dashboards/ has them,
// labelled for the sidecar.
func checkDashboards(t *testing.T, cms []corev1.ConfigMap) {
	t.Helper()
	seen := map[string]bool{}
	for _, cm := range cms {
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap %s lacks the sidecar's label: %v", cm.Name, cm.Labels)
		}
		for file, body := range cm.Data {
			want, err := os.ReadFile(filepath.Join("..", "dashboards", file))
			if err != nil {
				t.Fatalf("ConfigMap %s holds %s: %v", cm.Name, file, err)
			}
			if body != strings.TrimSuffix(string(want), "\n") {
				t.Errorf("ConfigMap %s: %s differs from dashboards/%s", cm.Name, file, file)
			}
			seen[file] = true
		}
	}
	if !seen["xdp-run-view.json"] || !seen["xdp-fleet-view.json"] || len(seen) != 2 {
		t.Errorf("dashboards in ConfigMaps: %v, want the run view and the fleet view", seen)
	}
}

// TestChartRules holds the PrometheusRules to dashboards/rules: the
// edge's groups are those of recording.yml and alerts.yml, in order, the
// global tier's (prometheusRule.global) those of global.yml, and they
// pass promtool's check and every unit test of dashboards/rules/tests
// that does not need the lab's rules.
func TestChartRules(t *testing.T) {
	groups := func(files ...string) []monitoringv1.RuleGroup {
		var want []monitoringv1.RuleGroup
		for _, f := range files {
			var file struct{ Groups []monitoringv1.RuleGroup }
			b, err := os.ReadFile(filepath.Join("..", "dashboards", "rules", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(b, &file); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			want = append(want, file.Groups...)
		}
		return want
	}
	r := render(t, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.global.enabled=true")
	if len(r.rules) != 2 {
		t.Fatalf("%d PrometheusRules rendered, want the edge's and the global tier's", len(r.rules))
	}
	byName := map[string][]monitoringv1.RuleGroup{}
	for _, pr := range r.rules {
		byName[pr.Name] = pr.Spec.Groups
	}
	edge, global := byName["xdp-exporter"], byName["xdp-exporter-global"]
	if want := groups("recording.yml", "alerts.yml"); !reflect.DeepEqual(edge, want) {
		t.Fatalf("the edge PrometheusRule's %d groups differ from dashboards/rules' %d", len(edge), len(want))
	}
	if want := groups("global.yml"); !reflect.DeepEqual(global, want) {
		t.Fatalf("the global PrometheusRule's %d groups differ from global.yml's %d", len(global), len(want))
	}
	promtoolRules(t, edge, global)
}

// promtoolRules checks the edge's and the global tier's groups with
// promtool and runs the rule unit tests on them: the edge's groups in
// alerts.yml, none in recording.yml, which the tests load together.
func promtoolRules(t *testing.T, edge, global []monitoringv1.RuleGroup) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not installed (apt-get install prometheus)")
	}
	dir := t.TempDir()
	alerts, err := yaml.Marshal(map[string]any{"groups": edge})
	if err != nil {
		t.Fatal(err)
	}
	globalRules, err := yaml.Marshal(map[string]any{"groups": global})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"alerts.yml": alerts, "recording.yml": []byte("groups: []\n"), "global.yml": globalRules} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(bin, "check", "rules", "--lint-fatal", filepath.Join(dir, "alerts.yml"), filepath.Join(dir, "global.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, err := filepath.Glob(filepath.Join("..", "dashboards", "rules", "tests", "*.yml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule tests: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("../lab.yml")) {
			continue // the lab's rules are not the chart's
		}
		if bytes.Contains(b, []byte("../alerts.yml")) && !bytes.Contains(b, []byte("../recording.yml")) {
			continue // alerts without their records: the chart ships both in one PrometheusRule
		}
		names = append(names, filepath.Base(f))
		if err := os.WriteFile(filepath.Join(dir, "tests", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, append([]string{"test", "rules"}, names...)...)
	cmd.Dir = filepath.Join(dir, "tests")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("promtool test rules passed %d files on the chart's groups", len(names))
}

// TestChartAlertmanagerConfig renders the chart's AlertmanagerConfig
// (decoded strictly as the Operator's v1alpha1 type) and holds it to
// deploy/alertmanager/alertmanager.yml: the same routes by severity, the
// same grouping and inhibitions, the receivers posting to the values'
// URLs.
func TestChartAlertmanagerConfig(t *testing.T) {
	r := render(t, "-f", "testdata/all-on.yaml")
	if len(r.amConfigs) != 1 {
		t.Fatalf("%d AlertmanagerConfigs rendered, want 1", len(r.amConfigs))
	}
	spec := r.amConfigs[0].Spec
	var am struct {
		Route struct {
			Routes []struct {
				Receiver string   `json:"receiver"`
				Matchers []string `json:"matchers"`
				GroupBy  []string `json:"group_by"`
				Routes   []struct {
					Receiver string   `json:"receiver"`
					Matchers []string `json:"matchers"`
				} `json:"routes"`
			} `json:"routes"`
		} `json:"route"`
		InhibitRules []struct {
			Source []string `json:"source_matchers"`
			Target []string `json:"target_matchers"`
			Equal  []string `json:"equal"`
		} `json:"inhibit_rules"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "alertmanager/alertmanager.yml")), &am); err != nil {
		t.Fatal(err)
	}
	if len(am.Route.Routes) != 1 {
		t.Fatalf("alertmanager.yml has %d routes under the root, want the XDP route", len(am.Route.Routes))
	}
	want := am.Route.Routes[0]
	matchers := func(ms []monitoringv1alpha1.Matcher) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name+string(m.MatchType)+strconvQuote(m.Value))
		}
		return out
	}
	if spec.Route == nil || spec.Route.Receiver != want.Receiver || !reflect.DeepEqual(matchers(spec.Route.Matchers), want.Matchers) ||
		!reflect.DeepEqual(spec.Route.GroupBy, want.GroupBy) {
		t.Errorf("route %+v, want alertmanager.yml's %+v", spec.Route, want)
	}
	children, err := spec.Route.ChildRoutes()
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != len(want.Routes) {
		t.Fatalf("%d child routes, want %d", len(children), len(want.Routes))
	}
	for i, c := range children {
		if c.Receiver != want.Routes[i].Receiver || !reflect.DeepEqual(matchers(c.Matchers), want.Routes[i].Matchers) {
			t.Errorf("child route %d: %s %v, want %s %v", i, c.Receiver, matchers(c.Matchers), want.Routes[i].Receiver, want.Routes[i].Matchers)
		}
	}
	if len(spec.InhibitRules) != len(am.InhibitRules) {
		t.Fatalf("%d inhibit rules, want %d", len(spec.InhibitRules), len(am.InhibitRules))
	}
	for i, ir := range spec.InhibitRules {
		w := am.InhibitRules[i]
		if !reflect.DeepEqual(matchers(ir.SourceMatch), w.Source) || !reflect.DeepEqual(matchers(ir.TargetMatch), w.Target) || !reflect.DeepEqual(ir.Equal, w.Equal) {
			t.Errorf("inhibit rule %d: %v -> %v on %v, want %v -> %v on %v", i, matchers(ir.SourceMatch), matchers(ir.TargetMatch), ir.Equal, w.Source, w.Target, w.Equal)
		}
	}
	urls := map[string]string{}
	for _, rc := range spec.Receivers {
		for _, w := range rc.WebhookConfigs {
			if w.URL != nil {
				urls[rc.Name] = string(*w.URL)
			}
		}
	}
	if urls["xdp-page"] != "https://pager.example.com/hooks/xdp" || urls["xdp-ticket"] != "https://tickets.example.com/hooks/xdp" {
		t.Errorf("receivers' URLs %v, want the values'", urls)
	}
}

// strconvQuote quotes a matcher's value as alertmanager.yml writes it.
func strconvQuote(s string) string { return `"` + s + `"` }

// TestVersionedImage: the chart's appVersion is the release of the
// VERSION file, the image tag defaults to it, and the plain manifests
// name the same versioned image: none runs an unversioned :latest.
func TestVersionedImage(t *testing.T) {
	release := strings.TrimSpace(readFile(t, "../VERSION"))
	var chartFile struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, chart+"/Chart.yaml")), &chartFile); err != nil {
		t.Fatal(err)
	}
	if chartFile.AppVersion != release {
		t.Errorf("Chart.yaml appVersion %q, VERSION %q", chartFile.AppVersion, release)
	}
	want := "xdp_exporter:" + release
	r := render(t)
	if got := r.daemonSets[0].Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("the chart's default image %q, want %q", got, want)
	}
	ds := plain[appsv1.DaemonSet](t, "daemonset.yaml")
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("deploy/kubernetes/daemonset.yaml runs %q, want %q", got, want)
	}
}
