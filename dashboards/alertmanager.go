package dashboards

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The Alertmanager side of the alerts: a routing tree by severity, one
// notification per incident, and inhibition rules that keep a fleet-wide
// incident to one page. Written under deploy/alertmanager/ (Alertmanager's
// own configuration and the notification templates) and, in the Prometheus
// Operator's AlertmanagerConfig form, into the Helm chart's files.

// Receivers the routes send to, by severity.
const (
	ReceiverPage   = "xdp-page"   // critical: a person now
	ReceiverTicket = "xdp-ticket" // warning: a ticket or a chat channel
	ReceiverNone   = "xdp-none"   // info: the alert list, no notification
)

// severityReceiver is the routing tree's leaves: each severity the rules
// use and the receiver it reaches.
var severityReceiver = []struct{ severity, receiver string }{
	{"critical", ReceiverPage},
	{"warning", ReceiverTicket},
	{"info", ReceiverNone},
}

// AlertmanagerConfig is the routing's settings: where the two receivers
// post (placeholders to fill in) and the notification timing. GroupWait
// is also the time an inhibiting alert has to arrive after the alerts it
// inhibits (InhibitRules' for: ordering leaves room for it).
type AlertmanagerConfig struct {
	PageURL        string `yaml:"page_url"`
	TicketURL      string `yaml:"ticket_url"`
	GroupWait      string `yaml:"group_wait"`
	GroupInterval  string `yaml:"group_interval"`
	RepeatInterval string `yaml:"repeat_interval"`
	// Templates is where xdp.tmpl is installed on the Alertmanager host.
	Templates string `yaml:"templates"`
}

// groupBy gives one notification per incident: a host alert groups the
// devices of one host, a fleet alert (no instance label) one job of one
// cluster.
func (c Config) groupBy() []string {
	return slices.DeleteFunc([]string{"alertname", c.ClusterLabel, "job", "instance"}, func(s string) bool { return s == "" })
}

// InhibitRule is one of Alertmanager's inhibit_rules: while an alert
// matching Source fires, alerts matching Target with the same Equal
// labels are not notified.
type InhibitRule struct {
	Source []string `yaml:"source_matchers"`
	Target []string `yaml:"target_matchers"`
	Equal  []string `yaml:"equal"`
	// SourceAlerts and TargetAlerts name the alerts the matchers select
	// (for the tests that order their for: durations); Gone says the
	// source means the host's series stopped, so its targets resolve on
	// their own instead of racing it.
	SourceAlerts, TargetAlerts []string `yaml:"-"`
	Gone                       bool     `yaml:"-"`
}

func alertsMatcher(op string, names ...string) string {
	if len(names) == 1 && op == "=" {
		return "alertname=" + quote(names[0])
	}
	return "alertname" + op + quote(strings.Join(names, "|"))
}

func quote(s string) string { return `"` + s + `"` }

// InhibitRules are the inhibitions, each with the runbook's reason.
func InhibitRules(cfg Config) []InhibitRule {
	host := cfg.groupBy()[1:] // cluster, job, instance
	fleet := host[:len(host)-1]
	device := append(slices.Clone(host), "device")
	gone := []string{AlertExporterDown, AlertFleetHostSilent}
	fleetDrops := []string{AlertNICDropsWhileIdle, AlertRxOutOfBuffer, AlertPauseWhileDropping, AlertFleetHostDrops}
	aerExplains := []string{AlertPCIeLinkDegraded, AlertPCIeAERCorr}
	return []InhibitRule{
		// A fleet-wide incident pages once: the hosts' own drop alerts of
		// the same cluster and job, at the edge and at the global tier,
		// are that incident.
		{Source: []string{alertsMatcher("=", AlertFleetWideDrops)}, Target: []string{alertsMatcher("=~", fleetDrops...)},
			Equal: fleet, SourceAlerts: []string{AlertFleetWideDrops}, TargetAlerts: fleetDrops},
		// The edge's alert for a device says first what the global tier's
		// says of the same device later.
		{Source: []string{alertsMatcher("=", AlertNICDropsWhileIdle)}, Target: []string{alertsMatcher("=", AlertFleetHostDrops)},
			Equal: append(slices.Clone(host), "device"), SourceAlerts: []string{AlertNICDropsWhileIdle}, TargetAlerts: []string{AlertFleetHostDrops}},
		// A host that cannot be scraped, or no longer reaches the global
		// tier, says everything its other alerts could.
		{Source: []string{alertsMatcher("=~", gone...)}, Target: []string{alertsMatcher("!~", gone...), `instance=~".+"`},
			Equal: host, SourceAlerts: gone, Gone: true},
		// An uncorrectable PCIe error explains the link's retraining and
		// the correctable errors around it on the same device.
		{Source: []string{alertsMatcher("=", AlertPCIeAERUncorr)}, Target: []string{alertsMatcher("=~", aerExplains...)},
			Equal: device, SourceAlerts: []string{AlertPCIeAERUncorr}, TargetAlerts: aerExplains},
	}
}

type amRoute struct {
	Receiver       string    `yaml:"receiver,omitempty"`
	Matchers       []string  `yaml:"matchers,omitempty"`
	GroupBy        []string  `yaml:"group_by,omitempty"`
	GroupWait      string    `yaml:"group_wait,omitempty"`
	GroupInterval  string    `yaml:"group_interval,omitempty"`
	RepeatInterval string    `yaml:"repeat_interval,omitempty"`
	Routes         []amRoute `yaml:"routes,omitempty"`
}

type amWebhook struct {
	URL          string `yaml:"url"`
	SendResolved bool   `yaml:"send_resolved"`
}

type amReceiver struct {
	Name     string      `yaml:"name"`
	Webhooks []amWebhook `yaml:"webhook_configs,omitempty"`
}

type amConfig struct {
	Templates    []string      `yaml:"templates"`
	Route        amRoute       `yaml:"route"`
	InhibitRules []InhibitRule `yaml:"inhibit_rules"`
	Receivers    []amReceiver  `yaml:"receivers"`
}

// xdpRoute is the subtree of the XDP alerts: merged into an existing
// Alertmanager configuration, it is one entry of the root's routes.
func xdpRoute(cfg Config) amRoute {
	a := cfg.Alertmanager
	r := amRoute{Receiver: ReceiverTicket, Matchers: []string{`alertname=~"XDP.+"`}, GroupBy: cfg.groupBy(),
		GroupWait: a.GroupWait, GroupInterval: a.GroupInterval, RepeatInterval: a.RepeatInterval}
	for _, s := range severityReceiver {
		r.Routes = append(r.Routes, amRoute{Receiver: s.receiver, Matchers: []string{"severity=" + quote(s.severity)}})
	}
	return r
}

func alertmanagerYAML(cfg Config) amConfig {
	a := cfg.Alertmanager
	return amConfig{
		Templates: []string{a.Templates},
		// The root's receiver takes what is not an XDP alert: the place of
		// the receivers an existing configuration already has.
		Route:        amRoute{Receiver: ReceiverNone, GroupBy: cfg.groupBy(), Routes: []amRoute{xdpRoute(cfg)}},
		InhibitRules: InhibitRules(cfg),
		Receivers: []amReceiver{
			{Name: ReceiverPage, Webhooks: []amWebhook{{URL: a.PageURL, SendResolved: true}}},
			{Name: ReceiverTicket, Webhooks: []amWebhook{{URL: a.TicketURL, SendResolved: true}}},
			{Name: ReceiverNone},
		},
	}
}

// notificationTemplates are the texts a chat, e-mail or paging receiver
// sends (xdp.title, xdp.text): per alert the host and device, the summary,
// the measured figures (the description), the first step (the action
// annotation) and the runbook. A webhook receiver sends the same data as
// JSON.
const notificationTemplates = `{{ define "xdp.title" }}[{{ .Status | toUpper }}{{ if eq .Status "firing" }}:{{ .Alerts.Firing | len }}{{ end }}] {{ .CommonLabels.alertname }}{{ with .CommonLabels.cluster }} {{ . }}{{ end }}{{ with .CommonLabels.job }}/{{ . }}{{ end }}{{ with .CommonLabels.instance }} on {{ . }}{{ end }}{{ end }}

{{ define "xdp.alert" }}{{ .Annotations.summary }}
{{ with .Labels.instance }}Host: {{ . }}{{ else }}Fleet: {{ .Labels.job }}{{ end }}{{ with .Labels.device }}, device {{ . }}{{ end }}{{ with .Labels.cluster }}, cluster {{ . }}{{ end }}, severity {{ .Labels.severity }}
{{ if eq .Status "firing" }}{{ .Annotations.description }}
Fix: {{ .Annotations.action }}
{{ else }}Resolved at {{ .EndsAt }}.
{{ end }}Runbook: {{ .Annotations.runbook_url }}
{{ end }}

{{ define "xdp.text" }}{{ range .Alerts }}{{ template "xdp.alert" . }}
{{ end }}{{ end }}
`

// Alertmanager returns deploy/alertmanager/'s files, their copies in the
// mixin and the chart's AlertmanagerConfig spec, keyed by their path
// relative to the repository.
func Alertmanager(cfg Config) (map[string][]byte, error) {
	out := map[string][]byte{"deploy/alertmanager/xdp.tmpl": []byte(notificationTemplates)}
	b, err := yamlWithHeader("dashboards/alertmanager.go", `Alertmanager's configuration for the XDP alerts (docs/install.md): critical
alerts page, warnings open a ticket, info alerts reach no one; one
notification per host or per fleet incident; the inhibitions say which
alert explains which. Fill in the two webhook URLs, or replace the
receivers with yours and their texts with xdp.tmpl's templates. To merge
it into a configuration you have, take the route under routes, the
inhibit_rules and the receivers.`, alertmanagerYAML(cfg))
	if err != nil {
		return nil, err
	}
	out["deploy/alertmanager/alertmanager.yml"] = b
	// The mixin carries both, as it carries the rules.
	out["mixin/generated/alertmanager/alertmanager.yml"] = b
	out["mixin/generated/alertmanager/xdp.tmpl"] = out["deploy/alertmanager/xdp.tmpl"]
	if out["deploy/helm/xdp-exporter/files/alertmanagerconfig.yaml"], err = yamlWithHeader("dashboards/alertmanager.go",
		`The AlertmanagerConfig spec of the chart (templates/alertmanagerconfig.yaml):
deploy/alertmanager/alertmanager.yml's route and inhibitions in the
Prometheus Operator's spelling; the receivers come from the values.`, operatorSpec(cfg)); err != nil {
		return nil, err
	}
	return out, nil
}

// operatorMatcher is the Operator's Matcher: a name, a value, an operator.
type operatorMatcher struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	MatchType string `yaml:"matchType"`
}

// operatorMatchers parses the matchers written above (name op "value").
func operatorMatchers(ms []string) []operatorMatcher {
	var out []operatorMatcher
	for _, m := range ms {
		i := strings.IndexAny(m, "=!")
		op := m[i : i+1]
		if next := m[i+1]; next == '=' || next == '~' {
			op = m[i : i+2]
		}
		out = append(out, operatorMatcher{Name: m[:i], MatchType: op, Value: strings.Trim(m[i+len(op):], `"`)})
	}
	return out
}

func operatorSpec(cfg Config) map[string]any {
	type route struct {
		Receiver       string            `yaml:"receiver"`
		Matchers       []operatorMatcher `yaml:"matchers"`
		GroupBy        []string          `yaml:"groupBy,omitempty"`
		GroupWait      string            `yaml:"groupWait,omitempty"`
		GroupInterval  string            `yaml:"groupInterval,omitempty"`
		RepeatInterval string            `yaml:"repeatInterval,omitempty"`
		Routes         []route           `yaml:"routes,omitempty"`
	}
	type inhibit struct {
		SourceMatch []operatorMatcher `yaml:"sourceMatch"`
		TargetMatch []operatorMatcher `yaml:"targetMatch"`
		Equal       []string          `yaml:"equal"`
	}
	x := xdpRoute(cfg)
	r := route{Receiver: x.Receiver, Matchers: operatorMatchers(x.Matchers), GroupBy: x.GroupBy,
		GroupWait: x.GroupWait, GroupInterval: x.GroupInterval, RepeatInterval: x.RepeatInterval}
	for _, c := range x.Routes {
		r.Routes = append(r.Routes, route{Receiver: c.Receiver, Matchers: operatorMatchers(c.Matchers)})
	}
	var rules []inhibit
	for _, ir := range InhibitRules(cfg) {
		rules = append(rules, inhibit{SourceMatch: operatorMatchers(ir.Source), TargetMatch: operatorMatchers(ir.Target), Equal: ir.Equal})
	}
	return map[string]any{"route": r, "inhibitRules": rules}
}

// yamlWithHeader renders doc as YAML under a comment saying which source
// generates it, and header.
func yamlWithHeader(source, header string, doc any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Generated by go generate ./dashboards (" + source + "). Do not edit.\n")
	for _, l := range strings.Split(header, "\n") {
		b.WriteString("# " + l + "\n")
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
