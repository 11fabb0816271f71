GO ?= go

.PHONY: all build release image test test-methods check test-kernels fuzz deps generate check-generated lint

all: build

# What --version, the start-up log line and xdp_exporter_build_info say:
# the release (the VERSION file, semantic versioning, as Prometheus'
# projects keep it), the revision and branch, who built it and when
# (prometheus/common/version). The build date is the commit's
# (SOURCE_DATE_EPOCH), so two builds of one commit are the same binary.
# OUT names the binary.
VERSION ?= $(shell cat VERSION)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BRANCH ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
BUILD_USER ?= $(shell id -un)@$(shell hostname)
OUT ?= xdp_exporter
versionpkg := github.com/prometheus/common/version
LDFLAGS := -X $(versionpkg).Version=$(VERSION) -X $(versionpkg).Revision=$(REVISION) -X $(versionpkg).Branch=$(BRANCH) \
	-X $(versionpkg).BuildUser=$(BUILD_USER) -X $(versionpkg).BuildDate=$(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y%m%d-%H:%M:%S)

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(OUT) ./cmd/xdp_exporter

# The release archives for linux/amd64 and linux/arm64 and their
# sha256sums.txt in dist/ (scripts/release): reproducible, two runs from
# one commit give the same sums.
release:
	./scripts/release

# The container image (Dockerfile, scripts/image): linux/amd64 and
# linux/arm64 in one manifest list, xdp_exporter:VERSION, built with podman
# from binaries cross-compiled here (no emulation); FROM scratch, so it
# builds offline.
IMAGE ?= xdp_exporter
image:
	IMAGE=$(IMAGE) ./scripts/image

deps:
	./scripts/install-deps

# The whole suite. Run it as root: it makes network namespaces and veth
# pairs, loads BPF programs and attaches XDP. Without root those tests skip,
# unless XDP_EXPORTER_REQUIRE_PRIVILEGED=1 (CI) turns the skip into a failure.
# Packages run one at a time (-p 1): the end-to-end test compares
# Prometheus' rates with the generator's within 5%, which another package's
# traffic test on the same two CPUs would disturb. Then the tests that
# send traffic again with each other method of the traffic generator the
# kernel allows (test-methods).
test: deps
	$(GO) test -p 1 -count=1 -timeout 45m ./...
	GO=$(GO) ./scripts/test-methods

# The tests that send traffic, with each method of the traffic generator
# (live frames, the devmap broadcast, AF_PACKET) that the kernel allows
# besides the one it picks by itself (scripts/test-methods).
test-methods:
	GO=$(GO) ./scripts/test-methods

# What needs neither root nor QEMU, for a contributor's first minute:
# the tests that need root (netns, veth, BPF, the kernel matrix, the
# end-to-end tests) skip, even as root. make test runs everything.
check:
	XDP_EXPORTER_UNPRIVILEGED=1 $(GO) test -count=1 ./...

# The kernel matrix alone (make test runs it too): Debian's 5.10, 6.1 and
# 6.12 kernels for amd64 and 6.12 for arm64, fetched with apt into
# /var/cache/xdp_exporter/kernels and booted in QEMU (amd64 over this
# machine's root, arm64 over a Debian root of its own), each running the
# real exporter and the kernel-facing test binaries (docs/kernels.md).
# XDP_EXPORTER_KERNELS=bookworm,trixie-arm64 picks suites.
test-kernels: deps
	$(GO) test -count=1 -v -timeout 45m -run TestKernelMatrix ./kernelmatrix

# Every Go fuzz target for FUZZTIME (default 60s) each; CI runs it after the tests.
fuzz:
	./scripts/fuzz-all

# Every generated file, each from the go:generate line beside its source:
# the bpf2go objects (bpf/, lab/trafficgen), METRICS.md (collector/metricsdoc),
# the dashboards and rules with the Helm chart's and the mixin's copies and
# docs/panels.md (dashboards), docs/kernels.md's support table (kernelmatrix,
# from its recording); then docs/flags.md, from the flags themselves
# (cmd/xdp_exporter's TestDocsFlagsReference). RECORD=1 first rewrites the recordings the tests compare
# with: the constructed netdev and ethtool STATS_GET, PAUSE_GET and FEC_GET replies, the AF_XDP
# diag reply, the whole-host fixture's scrape, the per-driver alert cases
# (dashboards/rules/tests/nic_drivers.yml), the XY charts' transformed
# frames, docs/cardinality.md's table of the fixture host's series, and
# what the kernel matrix measures (it boots the matrix: about
# 25 minutes). RECORD=capture also records this kernel's netdev and
# STATS_GET replies, whose values the readers' TestDecodeCaptured and
# TestCapturedReply then state anew.
RECORD ?=
generate:
ifneq ($(RECORD),)
	XDP_EXPORTER_RECORD=$(RECORD) $(GO) test -count=1 \
		-run '^(TestReplies|TestConstructedReply|TestConstructedPauseFECReplies|TestMACStatsLive|TestDecodeRecording|TestHostRecording|TestHostSeriesDoc|TestNICDriverAlertCases|TestXYReferenceSeriesResolve)$$' \
		./internal/kernel/netdev ./internal/kernel/ethtoolnl ./internal/kernel/xskdiag ./collector ./dashboards
	XDP_EXPORTER_RECORD=$(RECORD) $(GO) test -count=1 -v -timeout 45m -run '^TestKernelMatrix$$' ./kernelmatrix
endif
	$(GO) generate ./...
	XDP_EXPORTER_WRITE_DOCS=1 $(GO) test -count=1 -run '^TestDocsFlagsReference$$' ./cmd/xdp_exporter

# Regenerates every generated file and fails if any differs from what is
# committed.
check-generated: generate
	git diff --exit-code
	test -z "$$(git status --porcelain)"

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
