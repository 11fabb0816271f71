// Package bpf holds the exporter's BPF programs: one C source per program
// family, compiled by bpf2go into the committed *_bpfel.go and *_bpfel.o
// files. Regenerate with `go generate ./bpf` (Debian's clang 14 and
// libbpf-dev); .ci/run regenerates and fails on any difference.
//
// vmlinux.h was made on the development kernel (6.18) with
//
//	bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux.h
//
// Programs read kernel structures only through BTF-typed attachment
// (tp_btf) or CO-RE relocations, so the header's layout is a starting point
// that the loader relocates against the running kernel, not a promise.
package bpf

// Every program is compiled with the same flags: -g keeps BTF (needed for
// CO-RE and for map types), -O2 is required by the verifier.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package bpf Trafficgen trafficgen.c
