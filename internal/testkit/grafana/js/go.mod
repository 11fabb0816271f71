// Node.js packages (package.json, npm ci), not Go: this module keeps their
// node_modules, some of which carry Go files, out of the project's ./... .
module github.com/xdp-exporter/xdp_exporter/internal/testkit/grafana/js

go 1.26.8
