// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// A user's XDP program that hands every frame to another through a tail
// call, as chained firewalls and load balancers do: the entry passes what
// it keeps for itself only when the jump table is empty; the callee drops.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} jump SEC(".maps");

SEC("xdp")
int xdp_entry(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jump, 0);
	return XDP_PASS;
}

SEC("xdp")
int xdp_callee_drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
