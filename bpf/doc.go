// Package bpf holds the exporter's BPF objects, one Go package each next
// to its C source: the package owns the bpf2go output (the committed
// *_bpfel.go and *_bpfel.o files, with Go types generated from the C
// structs of its keys and values), loads and attaches the programs, and
// returns typed records. Nothing outside an object's package decodes its
// maps.
//
//   - drop: skb:kfree_skb by device and drop reason, and the reasons'
//     names from the kernel's BTF;
//   - napi: napi:napi_poll's work histogram and irq:softirq_*;
//   - xdpmon: the xdp:* tracepoints of xdp_monitor;
//   - rxq: the rxq collector's own XDP program (xdp_rxq_info);
//   - rxqobserve: the fexit observer of a user's XDP program;
//   - trafficgen: the live-frame generator's program;
//   - xdptest: XDP programs tests attach as a user's own.
//
// Shared by the tracepoint objects: slots (slots.h, the per-key counter
// tables, and their Go reader), reap (which keys of gone devices,
// programs and maps to delete) and tracing (loading tp_btf programs one by
// one after checking each tracepoint's prototype).
//
// Regenerate with `go generate ./bpf/...` (Debian's clang 14 and
// libbpf-dev); .ci/run regenerates and fails on any difference.
//
// vmlinux.h was made on the development kernel (6.18) with
//
//	bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux.h
//
// Programs read kernel structures only through BTF-typed attachment
// (tp_btf, fexit) or CO-RE relocations, so the header's layout is a
// starting point that the loader relocates against the running kernel,
// not a promise.
package bpf
