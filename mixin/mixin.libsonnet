// The xdp_exporter monitoring mixin: its alerting and recording rules and
// its run view and fleet view dashboards, as node-mixin offers node
// exporter's. The rules and dashboards in generated/ are written by the
// repository's generator (go generate ./dashboards), the same that writes
// dashboards/ and the Helm chart's copies.
//
//   local xdp = (import 'mixin.libsonnet') + { _config+:: { selector: 'job="xdp"' } };
//   { 'xdp-alerts.yaml': std.manifestYamlDoc(xdp.prometheusAlerts) }
//
// _config.tier: 'global' gives the rules of a fleet's global tier
// (generated/rules/global.yml) instead of the edge's (docs/scaling.md).
//
// alertmanagerConfig is Alertmanager's configuration for the alerts
// (deploy/alertmanager/alertmanager.yml: routes by severity, one
// notification per incident, the inhibitions), and alertmanagerTemplates
// its notification templates; merge the route, inhibit_rules and
// receivers into yours (docs/install.md):
//
//   { 'alertmanager.yml': std.manifestYamlDoc(xdp.alertmanagerConfig),
//     'xdp.tmpl': xdp.alertmanagerTemplates['xdp.tmpl'] }
//
// Thresholds are the generator's: regenerate generated/ with yours
// (go run ./dashboards/cmd/gen -config my-thresholds.yaml -out DIR
// -packages DIR writes DIR/mixin/generated).
{
  _config+:: {
    // Selects the exporter's series in every rule, as node-mixin's
    // nodeExporterSelector does.
    selector: 'job="xdp"',
    // Which tier of a fleet the rules are for (docs/scaling.md): 'edge',
    // the Prometheus that scrapes the hosts (the recording rules and
    // every host alert); 'global', the store that receives the edges'
    // remote write (the fleet roll-ups and the fleet alerts).
    tier: 'edge',
  },

  local generatedSelector = 'job="xdp"',
  local select(text) = std.strReplace(text, generatedSelector, $._config.selector),
  local global = std.parseYaml(select(importstr 'generated/rules/global.yml')),
  local tier(edge, globalGroup) =
    if $._config.tier == 'edge' then edge
    else if $._config.tier == 'global' then { groups: [g for g in global.groups if g.name == globalGroup] }
    else error "_config.tier must be 'edge' or 'global', not " + $._config.tier,

  prometheusAlerts+:: tier(std.parseYaml(select(importstr 'generated/rules/alerts.yml')), 'xdp_exporter.global.alerts'),
  prometheusRules+:: tier(std.parseYaml(select(importstr 'generated/rules/recording.yml')), 'xdp_exporter.global.recording'),
  alertmanagerConfig+:: std.parseYaml(importstr 'generated/alertmanager/alertmanager.yml'),
  alertmanagerTemplates+:: { 'xdp.tmpl': importstr 'generated/alertmanager/xdp.tmpl' },
  grafanaDashboards+:: {
    'xdp-run-view.json': std.parseJson(importstr 'generated/xdp-run-view.json'),
    'xdp-fleet-view.json': std.parseJson(importstr 'generated/xdp-fleet-view.json'),
  },
}
