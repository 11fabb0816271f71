// The xdp_exporter monitoring mixin: its alerting and recording rules and
// its run view and fleet view dashboards, as node-mixin offers node
// exporter's. The rules and dashboards in generated/ are written by the
// repository's generator (go generate ./dashboards), the same that writes
// dashboards/ and the Helm chart's copies.
//
//   local xdp = (import 'mixin.libsonnet') + { _config+:: { selector: 'job="xdp"' } };
//   { 'xdp-alerts.yaml': std.manifestYamlDoc(xdp.prometheusAlerts) }
//
// Thresholds are the generator's: regenerate generated/ with yours
// (go run ./dashboards/cmd/gen -config my-thresholds.yaml -out DIR
// -packages DIR writes DIR/mixin/generated).
{
  _config+:: {
    // Selects the exporter's series in every rule, as node-mixin's
    // nodeExporterSelector does.
    selector: 'job=~"xdp.*"',
  },

  local generatedSelector = 'job=~"xdp.*"',
  local select(text) = std.strReplace(text, generatedSelector, $._config.selector),

  prometheusAlerts+:: std.parseYaml(select(importstr 'generated/rules/alerts.yml')),
  prometheusRules+:: std.parseYaml(select(importstr 'generated/rules/recording.yml')),
  grafanaDashboards+:: {
    'xdp-run-view.json': std.parseJson(importstr 'generated/xdp-run-view.json'),
    'xdp-fleet-view.json': std.parseJson(importstr 'generated/xdp-fleet-view.json'),
  },
}
