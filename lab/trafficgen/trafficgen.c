// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// The live-frame traffic generator: run with BPF_PROG_RUN and
// BPF_F_TEST_XDP_LIVE_FRAMES against one end of a veth pair, each run turns
// the template frame into a real frame transmitted to the peer (XDP_TX in
// live mode is a redirect back out of the ingress device).
//
// The per-CPU counter is the truth about how many frames were handed to the
// kernel: BPF_PROG_RUN restarts from zero when a signal interrupts it, so
// the repeat count asked for is not always the count run.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sent SEC(".maps");

SEC("xdp")
int xdp_trafficgen(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&sent, &key);

	if (n)
		(*n)++;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
