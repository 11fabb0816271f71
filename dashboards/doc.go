// Package dashboards holds xdp_exporter's Grafana dashboards and Prometheus
// rules as code: the dashboards are built with grafana-foundation-sdk, the
// alerting and recording rules from the thresholds in Config, and
// `go generate ./dashboards` writes them to dashboards/*.json and
// dashboards/rules/*.yml. Tests check the committed files equal the
// generator's output and run promtool on the rules. Queries exports every
// panel's PromQL for the end-to-end test. See docs/dashboards.md and
// docs/runbook.md.
package dashboards

//go:generate go run ./cmd/gen -out . -docs ../docs/panels.md -packages ..
