GO ?= go

.PHONY: all build test deps generate check-generated lint

all: build

build:
	CGO_ENABLED=0 $(GO) build -o xdp_exporter ./cmd/xdp_exporter

deps:
	./scripts/install-deps

# The whole suite. Run it as root: it makes network namespaces and veth
# pairs, loads BPF programs and attaches XDP. Without root those tests skip,
# unless XDP_EXPORTER_REQUIRE_PRIVILEGED=1 (CI) turns the skip into a failure.
test: deps
	$(GO) test -count=1 -timeout 30m ./...

generate:
	$(GO) generate ./bpf/...

# Regenerates the bpf2go output and fails if it differs from what is committed.
check-generated: generate
	git diff --exit-code -- bpf
	test -z "$$(git status --porcelain -- bpf)"

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
