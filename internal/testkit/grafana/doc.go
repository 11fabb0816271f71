// Package grafana reproduces, for xdp_exporter's tests, what Grafana does
// with a dashboard's JSON between the queries and the drawing: the data
// frames its Prometheus and TestData datasources return, the panel
// transformations our dashboards use, field display names and matchers,
// and the xychart panel's migration and series preparation. No Grafana
// server can run on the machines this project is built on (it is not
// packaged, and its server is AGPL), so the tests hold the JSON to these
// semantics instead of rendering it. Each function names the Grafana
// source file it follows; docs/dashboards.md lists them with the versions
// they were read at.
//
// Only what the dashboards use is modelled. Anything else (a transformation,
// a matcher, a frame matcher) is an error, so a dashboard cannot start to
// depend on behaviour these tests do not check.
package grafana
