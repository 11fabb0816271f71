// Package grafana holds, for xdp_exporter's tests, what Grafana does with a
// dashboard's JSON between the queries and the drawing. No Grafana server
// runs on the machines this project is built on, so the tests hold the
// JSON to Grafana's own code instead of rendering it:
//
//   - what Grafana's Apache-2.0 libraries do comes from them, run by Node
//     (js/grafana.cjs, @grafana/data and @grafana/schema pinned by
//     js/package-lock.json): the panel transformations
//     (transformDataFrame), field display names (getFieldDisplayName),
//     field matchers (getFieldMatcher) and so which overrides apply, the
//     dashboard schemaVersion and the panel option names;
//   - what Grafana keeps under the AGPL is modelled here in Go, each
//     function naming the Grafana source file it follows: the frames of
//     the Prometheus datasource (pkg/promlib) and of TestData's CSV
//     content (pkg/tsdb/grafana-testdata-datasource), the xychart panel's
//     migration and series preparation
//     (public/app/plugins/panel/xychart).
//
// Only what the dashboards use is modelled. Anything else (a frame
// matcher xychart does not implement, a datasource) is an error, so a
// dashboard cannot start to depend on behaviour these tests do not check.
package grafana
