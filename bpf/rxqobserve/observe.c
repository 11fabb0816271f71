// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// The observer: an fexit program on an XDP program someone else attached.
// It runs after that program returns, sees its context (the kernel hands a
// tracing program the struct xdp_buff behind the struct xdp_md) and its
// verdict, and counts the packet by RX queue, CPU and verdict. It changes
// nothing: an fexit program cannot alter the return value.
//
// The loader loads one instance per observed program and device, with the
// device's ifindex and queue count set as read-only globals, and sizes the
// counters for that queue count.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

// verdict is the column of the counters: the XDP verdicts of enum
// xdp_action, and one for any other return value (the driver treats it as
// aborted after bpf_warn_invalid_xdp_action), so none goes uncounted.
enum verdict {
	VERDICT_ABORTED = XDP_ABORTED,
	VERDICT_DROP = XDP_DROP,
	VERDICT_PASS = XDP_PASS,
	VERDICT_TX = XDP_TX,
	VERDICT_REDIRECT = XDP_REDIRECT,
	VERDICT_UNKNOWN,
	VERDICTS,
};

// The enum's type in the object's BTF, for bpf2go to generate it in Go.
const enum verdict verdict_type_anchor = VERDICTS;

// rec is one counter cell on one CPU.
struct rec {
	__u64 packets;
	__u64 bytes;
};

// counts[queue * VERDICTS + verdict], per CPU. Row cfg_queues counts the
// packets of a queue_index at or beyond cfg_queues. The loader sets
// max_entries to (cfg_queues + 1) * VERDICTS.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VERDICTS);
	__type(key, __u32);
	__type(value, struct rec);
} counts SEC(".maps");

// The device this instance counts for: a program attached to several
// devices gets one instance per device.
volatile const __u32 cfg_ifindex = 0;
volatile const __u32 cfg_queues = 1;

// The loader points the program at its target (AttachTarget, AttachTo);
// the section name only gives the attach type.
SEC("fexit/xdp")
int BPF_PROG(observe, struct xdp_buff *xdp, int ret)
{
	struct xdp_rxq_info *rxq = xdp->rxq;
	__u32 queue, verdict, slot;
	struct rec *r;

	if (rxq->dev->ifindex != cfg_ifindex)
		return 0;
	queue = rxq->queue_index;
	if (queue > cfg_queues)
		queue = cfg_queues;
	verdict = (__u32)ret < VERDICT_UNKNOWN ? (__u32)ret : VERDICT_UNKNOWN;
	slot = queue * VERDICTS + verdict;
	r = bpf_map_lookup_elem(&counts, &slot);
	if (!r)
		return 0;
	r->packets++;
	r->bytes += xdp->data_end - xdp->data;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
