package dashboards

import (
	"fmt"
	"maps"
)

// The example configurations of a fleet's two tiers, written under
// deploy/ (Deploy): an edge Prometheus that scrapes its hosts, evaluates
// the edge rules and remote-writes what the global tier needs, the global
// Prometheus that receives it, and the same remote write as
// kube-prometheus-stack values. The keep rule is the one place the
// shipped series are listed; TestShippedCoversGlobalTier holds it to what
// the fleet view and the global rules read.

// relabel is one relabel rule, in Prometheus' spelling (yaml) and the
// Prometheus Operator's (its RelabelConfig: sourceLabels).
type relabel struct {
	SourceLabels []string `yaml:"source_labels"`
	Separator    string   `yaml:"separator,omitempty"`
	Regex        string   `yaml:"regex"`
	TargetLabel  string   `yaml:"target_label,omitempty"`
	Replacement  string   `yaml:"replacement,omitempty"`
	Action       string   `yaml:"action,omitempty"`
}

type operatorRelabel struct {
	SourceLabels []string `yaml:"sourceLabels"`
	Separator    string   `yaml:"separator"`
	Regex        string   `yaml:"regex"`
	Action       string   `yaml:"action"`
}

// keepRule is the write_relabel_configs rule that keeps what Shipped
// names.
func keepRule(cfg Config) (relabel, error) {
	re, err := KeepRegex(cfg)
	return relabel{SourceLabels: []string{"__name__", "job", "alertname"}, Separator: ";", Regex: re, Action: "keep"}, err
}

type promConfig struct {
	Global struct {
		ScrapeInterval     string            `yaml:"scrape_interval,omitempty"`
		ScrapeTimeout      string            `yaml:"scrape_timeout,omitempty"`
		EvaluationInterval string            `yaml:"evaluation_interval"`
		ExternalLabels     map[string]string `yaml:"external_labels,omitempty"`
	} `yaml:"global"`
	RuleFiles     []string       `yaml:"rule_files"`
	Alerting      *alerting      `yaml:"alerting,omitempty"`
	ScrapeConfigs []scrapeConfig `yaml:"scrape_configs,omitempty"`
	RemoteWrite   []remoteWrite  `yaml:"remote_write,omitempty"`
}

// alerting sends the alerts to Alertmanager: both tiers send to the same
// one, whose inhibitions relate the edge's alerts to the global tier's.
type alerting struct {
	Alertmanagers []struct {
		StaticConfigs []staticConfig `yaml:"static_configs"`
	} `yaml:"alertmanagers"`
}

func alertmanagerAt(target string) *alerting {
	a := &alerting{}
	a.Alertmanagers = append(a.Alertmanagers, struct {
		StaticConfigs []staticConfig `yaml:"static_configs"`
	}{[]staticConfig{{[]string{target}}}})
	return a
}

type staticConfig struct {
	Targets []string `yaml:"targets"`
}

type scrapeConfig struct {
	JobName        string         `yaml:"job_name"`
	StaticConfigs  []staticConfig `yaml:"static_configs"`
	RelabelConfigs []relabel      `yaml:"relabel_configs"`
}

type remoteWrite struct {
	URL                 string    `yaml:"url"`
	WriteRelabelConfigs []relabel `yaml:"write_relabel_configs"`
}

// globalURL is the example receiver: a Prometheus with
// --web.enable-remote-write-receiver; Thanos Receive, Mimir, Cortex and
// VictoriaMetrics take the same protocol at their own paths.
const globalURL = "http://global.example.net:9090/api/v1/write"

// alertmanagerTarget is the example Alertmanager both tiers send to
// (deploy/alertmanager/alertmanager.yml).
const alertmanagerTarget = "alertmanager.example.net:9093"

// Deploy returns the example configurations, keyed by their path
// relative to the repository: the fleet's Prometheus configurations and
// the Alertmanager's.
func Deploy(cfg Config) (map[string][]byte, error) {
	out, err := Alertmanager(cfg)
	if err != nil {
		return nil, err
	}
	prom, err := prometheusExamples(cfg)
	maps.Copy(out, prom)
	return out, err
}

// prometheusExamples are the edge's and global tier's configurations and
// the edge's remote write as kube-prometheus-stack values.
func prometheusExamples(cfg Config) (map[string][]byte, error) {
	keep, err := keepRule(cfg)
	if err != nil {
		return nil, err
	}
	external := map[string]string{}
	if cfg.ClusterLabel != "" {
		external[cfg.ClusterLabel] = "dc1"
	}
	// Each edge a value of its own (kube-prometheus-stack sets this label
	// itself): series without an instance, as ALERTS of XDPExporterDown's
	// absent() case, would otherwise come from two edges with the same
	// labels, and the receiver refuses the second as a duplicate.
	edgeLabels := map[string]string{"prometheus": "rack1"}
	for k, v := range external {
		edgeLabels[k] = v
	}
	var edge promConfig
	edge.Global.ScrapeInterval, edge.Global.ScrapeTimeout, edge.Global.EvaluationInterval = "15s", "10s", "15s"
	edge.Global.ExternalLabels = edgeLabels
	edge.RuleFiles = []string{"/etc/prometheus/xdp/recording.yml", "/etc/prometheus/xdp/alerts.yml"}
	edge.Alerting = alertmanagerAt(alertmanagerTarget)
	job := scrapeConfig{JobName: "xdp", RelabelConfigs: []relabel{
		// The instance without the port, as deploy/prometheus/prometheus.yml.
		{SourceLabels: []string{"__address__"}, Regex: `([^:]+)(?::\d+)?`, TargetLabel: "instance", Replacement: "$1"},
	}}
	job.StaticConfigs = []staticConfig{{[]string{"dut1.example.net:9739", "dut2.example.net:9739"}}}
	edge.ScrapeConfigs = []scrapeConfig{job}
	edge.RemoteWrite = []remoteWrite{{URL: globalURL, WriteRelabelConfigs: []relabel{keep}}}
	var global promConfig
	global.Global.EvaluationInterval = "15s"
	global.RuleFiles = []string{"/etc/prometheus/xdp/global.yml"}
	global.Alerting = alertmanagerAt(alertmanagerTarget)
	type operatorRemoteWrite struct {
		URL                 string            `yaml:"url"`
		WriteRelabelConfigs []operatorRelabel `yaml:"writeRelabelConfigs"`
	}
	kube := map[string]any{"prometheus": map[string]any{"prometheusSpec": map[string]any{
		"externalLabels": external,
		"remoteWrite": []operatorRemoteWrite{{URL: globalURL, WriteRelabelConfigs: []operatorRelabel{{
			SourceLabels: keep.SourceLabels, Separator: keep.Separator, Regex: keep.Regex, Action: keep.Action}}}},
	}}}
	out := map[string][]byte{}
	for path, f := range map[string]struct {
		doc    any
		header string
	}{
		"deploy/prometheus/edge.yml": {edge, `An edge Prometheus of a fleet (docs/scaling.md): it scrapes the hosts of its
cluster or rack, evaluates the edge rules (dashboards/rules/recording.yml
and alerts.yml, copied to /etc/prometheus/xdp/) where the raw series are,
and remote-writes to the global tier only what the fleet view and the
global rules read: the keep rule below (docs/scaling.md counts them). Its
alerts go to the Alertmanager of deploy/alertmanager, as the global tier's.`},
		"deploy/prometheus/global.yml": {global, `The global tier of a fleet (docs/scaling.md): a Prometheus started with
--web.enable-remote-write-receiver receives what the edges write
(deploy/prometheus/edge.yml) and evaluates dashboards/rules/global.yml.
Thanos Receive, Grafana Mimir, Cortex and VictoriaMetrics take the same
remote-write protocol and run the same rule file in their rulers. Its
alerts go to the Alertmanager the edges send theirs to (deploy/alertmanager),
whose inhibitions relate the two tiers' alerts.`},
		"deploy/kubernetes/kube-prometheus-remote-write.yaml": {kube, `kube-prometheus-stack values for an edge cluster (docs/scaling.md):
the cluster's external label and the remote write of what the global tier
needs, the keep rule of deploy/prometheus/edge.yml. The edge rules come
with the xdp-exporter chart (prometheusRule.enabled); the global rules
with prometheusRule.global on the global tier's cluster.`},
	} {
		if out[path], err = yamlWithHeader("dashboards/remotewrite.go", f.header, f.doc); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return out, nil
}
