package deploy

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v2"

	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

const (
	unitPath       = "systemd/xdp_exporter.service"
	daemonSetPath  = "kubernetes/daemonset.yaml"
	servicePath    = "kubernetes/service.yaml"
	monitorPath    = "kubernetes/servicemonitor.yaml"
	k8sJobPath     = "kubernetes/prometheus-job.yml"
	promConfigPath = "prometheus/prometheus.yml"
	privilegesPath = "../docs/privileges.md"
	installPath    = "../docs/install.md"
	dockerfilePath = "../Dockerfile"
)

// capSet is a set of capability names, upper case without the CAP_
// prefix ("BPF", "SYS_ADMIN"), the spelling Kubernetes and Docker use.
type capSet map[string]bool

func newCapSet(names ...string) capSet {
	s := capSet{}
	for _, n := range names {
		n = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(n)), "CAP_")
		if n != "" && n != "NONE" {
			s[n] = true
		}
	}
	return s
}

func capSetOf(nums []int) capSet {
	s := capSet{}
	for _, c := range nums {
		s[strings.TrimPrefix(strings.ToUpper(caps.Name(c)), "CAP_")] = true
	}
	return s
}

func (s capSet) String() string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func (s capSet) equal(o capSet) bool { return s.String() == o.String() }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// privilegeRow is one collector's row of the table in docs/privileges.md.
type privilegeRow struct {
	defaultOn     bool
	start, scrape capSet
}

// privilegesTable parses the per-collector table of docs/privileges.md.
func privilegesTable(t *testing.T) map[string]privilegeRow {
	t.Helper()
	rows := map[string]privilegeRow{}
	inTable := false
	for _, line := range strings.Split(readFile(t, privilegesPath), "\n") {
		if strings.HasPrefix(line, "| collector | default | to start | monitor, at scrape time | HTTP server |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 5 {
			t.Fatalf("%s: short row %q", privilegesPath, line)
		}
		// The server runs no collector: TestPrivilegeSeparation and
		// TestSystemdCapabilities check that it holds nothing.
		if server := strings.TrimSpace(cells[4]); server != "none" {
			t.Errorf("%s: the HTTP server holds %q for %s; it holds nothing", privilegesPath, server, cells[0])
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		rows[name] = privilegeRow{
			defaultOn: strings.TrimSpace(cells[1]) == "on",
			start:     newCapSet(strings.Split(cells[2], ",")...),
			scrape:    newCapSet(strings.Split(cells[3], ",")...),
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no per-collector table", privilegesPath)
	}
	return rows
}

// grantedCaps is the union of the "to start" column: what every
// deployment file must grant so that any collector can be enabled.
func grantedCaps(t *testing.T) capSet {
	t.Helper()
	all := capSet{}
	for _, r := range privilegesTable(t) {
		for c := range r.start {
			all[c] = true
		}
	}
	return all
}

// TestPrivilegesTable: the table in docs/privileges.md has a row for every
// registered collector, with its default state and exactly the
// capabilities it declares for scrape time (which --runtime.drop-capabilities
// keeps), and the docker run lines grant the union of the table.
func TestPrivilegesTable(t *testing.T) {
	rows := privilegesTable(t)
	for _, r := range collector.Registrations() {
		row, ok := rows[r.Name]
		if !ok {
			t.Errorf("collector %s has no row in %s", r.Name, privilegesPath)
			continue
		}
		if row.defaultOn != r.DefaultEnabled {
			t.Errorf("%s: default %v in %s, %v in the code", r.Name, row.defaultOn, privilegesPath, r.DefaultEnabled)
		}
		if want := capSetOf(r.ScrapeCapabilities); !row.scrape.equal(want) {
			t.Errorf("%s: scrape-time capabilities %q in %s, the registration declares %q", r.Name, row.scrape, privilegesPath, want)
		}
	}
	want := grantedCaps(t)
	capAdd := regexp.MustCompile(`--cap-add[ =]([A-Z_]+)`)
	for _, path := range []string{dockerfilePath, installPath, privilegesPath} {
		got := capSet{}
		for _, m := range capAdd.FindAllStringSubmatch(readFile(t, path), -1) {
			got[m[1]] = true
		}
		if !got.equal(want) {
			t.Errorf("%s: docker run adds %q, the privilege table needs %q", path, got, want)
		}
		if !strings.Contains(readFile(t, path), "--cap-drop ALL") {
			t.Errorf("%s: docker run line without --cap-drop ALL", path)
		}
	}
}

// unitSettings parses a systemd unit into key -> values (a key may repeat).
func unitSettings(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("unit: not key=value: %q", line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// TestSystemdUnit checks the unit's sandbox and capability settings against
// docs/privileges.md and runs `systemd-analyze verify` on it.
func TestSystemdUnit(t *testing.T) {
	text := readFile(t, unitPath)
	s := unitSettings(t, text)
	want := grantedCaps(t)
	for _, key := range []string{"AmbientCapabilities", "CapabilityBoundingSet"} {
		if len(s[key]) != 1 {
			t.Fatalf("%s set %d times, want once", key, len(s[key]))
		}
		if got := newCapSet(strings.Fields(s[key][0])...); !got.equal(want) {
			t.Errorf("%s=%q, the privilege table needs %q", key, got, want)
		}
	}
	for k, v := range map[string]string{
		"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "PrivateDevices": "yes", "LimitMEMLOCK": "infinity",
	} {
		if got := strings.Join(s[k], ","); got != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	families := newCapSet(strings.Fields(strings.Join(s["RestrictAddressFamilies"], " "))...)
	if !families.equal(newCapSet("AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK")) {
		t.Errorf("RestrictAddressFamilies=%q, want AF_UNIX AF_INET AF_INET6 AF_NETLINK", families)
	}
	if len(s["ExecStart"]) != 1 || !strings.Contains(s["ExecStart"][0], "--runtime.drop-capabilities") {
		t.Errorf("ExecStart=%q does not drop capabilities", s["ExecStart"])
	}
	for _, forbidden := range []string{"PrivateNetwork", "PrivateUsers", "ProcSubset"} {
		if _, ok := s[forbidden]; ok {
			t.Errorf("%s hides what the exporter must see (docs/security.md)", forbidden)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Unavailable(t, "systemd-analyze not installed")
		return
	}
	// verify insists that ExecStart exists: point it at the test binary.
	unit := filepath.Join(t.TempDir(), "xdp_exporter.service")
	text = strings.ReplaceAll(text, "/usr/local/bin/xdp_exporter", exportertest.Build(t))
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// systemd-analyze reports unknown keys and bad values on stderr but
	// still exits 0, so any output is a failure.
	out, err := exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSystemdCapabilities runs the real binary the way the unit does, as an
// unprivileged user holding the unit's capabilities as ambient capabilities
// within the unit's bounding set, with no_new_privs: every default
// collector must work with exactly that grant, and after
// --runtime.drop-capabilities every thread keeps only what the default
// collectors declare for scrape time (the bounding set stays: no
// CAP_SETPCAP, as under systemd).
func TestSystemdCapabilities(t *testing.T) {
	testenv.Privileged(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testenv.Unavailable(t, "setpriv (util-linux) not installed")
		return
	}
	s := unitSettings(t, readFile(t, unitPath))
	var list []string
	for _, c := range strings.Fields(s["AmbientCapabilities"][0]) {
		list = append(list, "+"+strings.TrimPrefix(strings.ToLower(c), "cap_"))
	}
	capList := "-all," + strings.Join(list, ",")
	bin := exportertest.Build(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil { // let the unprivileged user reach it
		t.Fatal(err)
	}
	addr := exportertest.FreeAddr(t)
	e := exportertest.Start(t, addr, exec.Command(setpriv,
		"--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps="+capList, "--ambient-caps="+capList, "--bounding-set="+capList, "--no-new-privs",
		bin, "--runtime.drop-capabilities", "--web.listen-address="+addr))
	body := e.Scrape(t)
	if err := exportertest.CheckScrape(body); err != nil {
		t.Fatalf("with the unit's capabilities: %v\nlog:\n%s", err, e.Stderr)
	}

	if uids := e.Status(t).UIDs; uids != [4]uint64{65534, 65534, 65534, 65534} {
		t.Fatalf("the exporter runs as uids %v (real, effective, saved, fs), want 65534", uids)
	}

	var keep []int
	for _, r := range collector.Registrations() {
		if r.DefaultEnabled {
			keep = append(keep, r.ScrapeCapabilities...)
		}
	}
	bounding := newCapSet(strings.Fields(s["CapabilityBoundingSet"][0])...)
	for path, got := range e.ThreadCaps(t) {
		if g := capSetOf(bits(got.Effective)); !g.equal(capSetOf(keep)) {
			t.Errorf("%s: effective %q, want %q", path, g, capSetOf(keep))
		}
		if got.Permitted != got.Effective || got.Inheritable != 0 || got.Ambient != 0 {
			t.Errorf("%s: %+v, want permitted = effective, no inheritable, no ambient", path, got)
		}
		if g := capSetOf(bits(got.Bounding)); !g.equal(bounding) {
			t.Errorf("%s: bounding %q, want the unit's %q", path, g, bounding)
		}
	}

	// The process that answers the network is the server the exporter
	// started: the same user, no capability at all, no_new_privs, and
	// its seccomp filter.
	server := exportertest.ListeningPID(t, addr)
	if server == e.Cmd.Process.Pid {
		t.Fatal("the exporter listens itself: no privilege separation under the unit's flags")
	}
	want := map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapInh": "0000000000000000",
		"CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2", "Uid": "65534\t65534\t65534\t65534"}
	for path, got := range exportertest.StatusLines(t, server, slices.Collect(maps.Keys(want))...) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("server %s: %s %q, want %q", path, k, got[k], v)
			}
		}
	}
}

func bits(s caps.Set) []int {
	var out []int
	for c := 0; c < 64; c++ {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// The parts of the Kubernetes objects the tests check.
type (
	k8sMeta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	k8sContainer struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		SecurityContext struct {
			RunAsUser                *int  `yaml:"runAsUser"`
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			Privileged               *bool `yaml:"privileged"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Add  []string `yaml:"add"`
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []any `yaml:"volumeMounts"`
	}
	daemonSet struct {
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
		Spec       struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata k8sMeta `yaml:"metadata"`
				Spec     struct {
					HostNetwork bool           `yaml:"hostNetwork"`
					HostPID     bool           `yaml:"hostPID"`
					Containers  []k8sContainer `yaml:"containers"`
					Volumes     []any          `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	service struct {
		Kind     string  `yaml:"kind"`
		Metadata k8sMeta `yaml:"metadata"`
		Spec     struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string `yaml:"name"`
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	serviceMonitor struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Endpoints []struct {
				Port string `yaml:"port"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}
)

func loadYAML(t *testing.T, path string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(readFile(t, path)), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// subset reports whether every key=value of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// TestKubernetesManifests parses the DaemonSet, Service and ServiceMonitor
// and checks their security settings against docs/privileges.md and their
// selectors and port names against each other.
func TestKubernetesManifests(t *testing.T) {
	var ds daemonSet
	loadYAML(t, daemonSetPath, &ds)
	if ds.Kind != "DaemonSet" || ds.APIVersion != "apps/v1" {
		t.Fatalf("%s: %s %s, want apps/v1 DaemonSet", daemonSetPath, ds.APIVersion, ds.Kind)
	}
	pod := ds.Spec.Template
	if !subset(ds.Spec.Selector.MatchLabels, pod.Metadata.Labels) {
		t.Errorf("selector %v does not match the pod labels %v", ds.Spec.Selector.MatchLabels, pod.Metadata.Labels)
	}
	if !pod.Spec.HostNetwork {
		t.Error("hostNetwork must be true: the devices are the node's")
	}
	if pod.Spec.HostPID {
		t.Error("hostPID is not needed (docs/privileges.md)")
	}
	if len(pod.Spec.Volumes) > 0 {
		t.Errorf("volumes %v: docs/privileges.md says none is needed", pod.Spec.Volumes)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	checkContainer(t, c)

	var svc service
	loadYAML(t, servicePath, &svc)
	if svc.Kind != "Service" || !subset(svc.Spec.Selector, pod.Metadata.Labels) {
		t.Errorf("%s: %s selecting %v does not select the pods %v", servicePath, svc.Kind, svc.Spec.Selector, pod.Metadata.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != c.Ports[0].Name || svc.Spec.Ports[0].Port != 9739 {
		t.Errorf("%s: ports %+v, want 9739 -> the container's %q", servicePath, svc.Spec.Ports, c.Ports[0].Name)
	}

	var sm serviceMonitor
	loadYAML(t, monitorPath, &sm)
	if sm.Kind != "ServiceMonitor" || !subset(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) {
		t.Errorf("%s: selector %v does not select the Service labels %v", monitorPath, sm.Spec.Selector.MatchLabels, svc.Metadata.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name {
		t.Errorf("%s: endpoints %+v, want the Service port %q", monitorPath, sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}

	checkPodDiscovery(t, pod.Metadata.Labels["app.kubernetes.io/name"], c.Ports[0].Name)
}

// checkContainer checks the container's security settings against
// docs/privileges.md, and its port and arguments.
func checkContainer(t *testing.T, c k8sContainer) {
	t.Helper()
	sc := c.SecurityContext
	if got := newCapSet(sc.Capabilities.Add...); !got.equal(grantedCaps(t)) {
		t.Errorf("capabilities.add %q, the privilege table needs %q", got, grantedCaps(t))
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities.drop %v, want [ALL]", sc.Capabilities.Drop)
	}
	for name, ok := range map[string]bool{
		"readOnlyRootFilesystem: true":    sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		"allowPrivilegeEscalation: false": sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		"privileged: false":               sc.Privileged != nil && !*sc.Privileged,
		// uid 0 on purpose: docs/privileges.md explains why.
		"runAsUser: 0":         sc.RunAsUser != nil && *sc.RunAsUser == 0,
		"runAsNonRoot: false":  sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot,
		"no volumeMounts":      len(c.VolumeMounts) == 0,
		"drops capabilities":   slices.Contains(c.Args, "--runtime.drop-capabilities"),
		"port 9739 (metrics)":  len(c.Ports) == 1 && c.Ports[0].ContainerPort == 9739 && c.Ports[0].Name == "metrics",
		"listens on port 9739": slices.Contains(c.Args, "--web.listen-address=:9739"),
	} {
		if !ok {
			t.Errorf("%s: container %s: want %s", daemonSetPath, c.Name, name)
		}
	}
}

// checkPodDiscovery evaluates the pod-discovery job's keep rule on a pod
// with app label app and container port name port: it must keep it.
func checkPodDiscovery(t *testing.T, app, port string) {
	t.Helper()
	// The pod-discovery job keeps targets whose app label and port name
	// are the DaemonSet's: evaluate its keep rule on them.
	var jobs []struct {
		JobName        string `yaml:"job_name"`
		RelabelConfigs []struct {
			SourceLabels []string `yaml:"source_labels"`
			Regex        string   `yaml:"regex"`
			Action       string   `yaml:"action"`
		} `yaml:"relabel_configs"`
	}
	loadYAML(t, k8sJobPath, &jobs)
	if len(jobs) != 1 || len(jobs[0].RelabelConfigs) == 0 || jobs[0].RelabelConfigs[0].Action != "keep" {
		t.Fatalf("%s: want one job whose first relabeling keeps the exporter's pods: %+v", k8sJobPath, jobs)
	}
	keep := jobs[0].RelabelConfigs[0]
	values := map[string]string{
		"__meta_kubernetes_pod_label_app_kubernetes_io_name": app,
		"__meta_kubernetes_pod_container_port_name":          port,
	}
	var joined []string
	for _, l := range keep.SourceLabels {
		joined = append(joined, values[l])
	}
	if !regexp.MustCompile("^(?:" + keep.Regex + ")$").MatchString(strings.Join(joined, ";")) {
		t.Errorf("%s: keep rule %+v drops the DaemonSet's pods (%v)", k8sJobPath, keep, joined)
	}
}

// TestPrometheusConfig runs `promtool check config` on the example
// configuration, and on a configuration holding the Kubernetes job.
func TestPrometheusConfig(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Unavailable(t, "promtool not installed (apt-get install prometheus)")
		return
	}
	// The fleet's two tiers load their rule files from /etc/prometheus/xdp
	// (docs/install.md): checked with the repository's in their place.
	rules, err := filepath.Abs(filepath.Join("..", "dashboards", "rules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{promConfigPath, "prometheus/edge.yml", "prometheus/global.yml"} {
		placed := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.WriteFile(placed, []byte(strings.ReplaceAll(readFile(t, path), "/etc/prometheus/xdp", rules)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", "config", "--lint-fatal", placed).CombinedOutput(); err != nil {
			t.Errorf("promtool check config %s: %v\n%s", path, err, out)
		}
	}

	job := readFile(t, k8sJobPath)
	var indented []string
	for _, line := range strings.Split(job, "\n") {
		indented = append(indented, "  "+line)
	}
	cfg := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("scrape_configs:\n"+strings.Join(indented, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "config", cfg).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && strings.Contains(string(out), "field kubernetes_sd_configs not found"):
		// Debian builds Prometheus without Kubernetes discovery; the job's
		// YAML and relabeling are checked by TestKubernetesManifests.
		t.Logf("this promtool has no Kubernetes discovery; %s checked as YAML only", k8sJobPath)
	default:
		t.Errorf("promtool check config with %s: %v\n%s", k8sJobPath, err, out)
	}
}

// TestRemoteWriteValues: the kube-prometheus-stack values snippet holds
// a RemoteWriteSpec of the Prometheus Operator (unknown fields refused),
// and its keep rule is deploy/prometheus/edge.yml's.
func TestRemoteWriteValues(t *testing.T) {
	values := decode[struct {
		Prometheus struct {
			PrometheusSpec struct {
				ExternalLabels map[string]string              `json:"externalLabels"`
				RemoteWrite    []monitoringv1.RemoteWriteSpec `json:"remoteWrite"`
			} `json:"prometheusSpec"`
		} `json:"prometheus"`
	}](t, readFile(t, "kubernetes/kube-prometheus-remote-write.yaml"))
	spec := values.Prometheus.PrometheusSpec
	if len(spec.RemoteWrite) != 1 || len(spec.RemoteWrite[0].WriteRelabelConfigs) != 1 || spec.ExternalLabels["cluster"] == "" {
		t.Fatalf("values: %+v; want one remoteWrite with the keep rule, and the cluster label", spec)
	}
	var edge struct {
		RemoteWrite []struct {
			WriteRelabelConfigs []struct {
				SourceLabels []string `yaml:"source_labels"`
				Separator    string   `yaml:"separator"`
				Regex        string   `yaml:"regex"`
				Action       string   `yaml:"action"`
			} `yaml:"write_relabel_configs"`
		} `yaml:"remote_write"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "prometheus/edge.yml")), &edge); err != nil {
		t.Fatal(err)
	}
	keep := edge.RemoteWrite[0].WriteRelabelConfigs[0]
	got := spec.RemoteWrite[0].WriteRelabelConfigs[0]
	var sources []string
	for _, l := range got.SourceLabels {
		sources = append(sources, string(l))
	}
	if got.Regex != keep.Regex || !slices.Equal(sources, keep.SourceLabels) || got.Separator == nil || *got.Separator != keep.Separator ||
		!strings.EqualFold(got.Action, keep.Action) {
		t.Errorf("the values' keep rule %+v is not edge.yml's %+v", got, keep)
	}
}
