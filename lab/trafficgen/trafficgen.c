// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// The traffic generator's programs.
//
// Live frames: run with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES against
// one end of a veth pair, each run of xdp_trafficgen turns the template
// frame into a real frame transmitted to the peer (XDP_TX in live mode is a
// redirect back out of the ingress device).
//
// The broadcast loop, for kernels that refuse live frames: a second veth
// pair inside the generator's namespace carries one frame around a loop at
// kernel speed. xdp_bounce on one end sends every frame back (XDP_TX);
// xdp_fan on the other end broadcasts each lap through the fan devmap
// (BPF_F_BROADCAST): one copy back into the loop, the others out of the
// generator's end to the device under test. xdp_fan_out, the devmap
// program of those entries, lets a copy go only while the CPU's target is
// not reached, so exactly the target leaves; the loop ends by itself when
// it is.
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

// How many frames each CPU's loop sends in all, keyed by CPU; written by
// the CPU's worker only, read here. Its size is set at load time to the
// number of possible CPUs.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} fan_target SEC(".maps");

// How many of the next copies xdp_fan_out drops before it lets any go,
// per CPU: the lap that reaches the target sends its last copies, not its
// first. Veth wakes the receiver's NAPI only when a flush hands it frames,
// and the devmap flushes full bulks of 16 without waking it, so a last
// lap whose final bulk was all dropped left up to 48 frames on the
// receiver's ring, unseen until the next traffic.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lap_skip SEC(".maps");

// Entry 0 sends the lap back into the loop; the others, out of the
// generator's end, each through xdp_fan_out. How many there are is the
// number of frames one lap sends, set at load time.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} fan SEC(".maps");

// probe_fan stays empty: xdp_probe broadcasts into it, so a live run of
// the probe sends nothing anywhere.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} probe_fan SEC(".maps");

// xdp_probe tells the generator what the kernel allows: run with live
// frames, whether it takes them at all; run plainly, whether
// bpf_redirect_map takes BPF_F_BROADCAST (Linux 5.14, "bpf: Add redirect
// broadcast support"), which returns XDP_REDIRECT where it does and
// XDP_ABORTED where the flag is unknown.
SEC("xdp")
int xdp_probe(struct xdp_md *ctx)
{
	return bpf_redirect_map(&probe_fan, 0, BPF_F_BROADCAST);
}

SEC("xdp")
int xdp_trafficgen(struct xdp_md *ctx)
{
	__u32 key = 0;
	__u64 *n = bpf_map_lookup_elem(&sent, &key);

	if (n)
		(*n)++;
	return XDP_TX;
}

SEC("xdp")
int xdp_bounce(struct xdp_md *ctx)
{
	return XDP_TX;
}

// FAN_COPIES is the number of entries that send out of the generator's
// end (the Go side's fanCopies).
#define FAN_COPIES 64

// left returns how many frames this CPU has still to send, 0 when the
// maps cannot be read, so that a loop never runs unbounded.
static __always_inline __u64 left(__u64 **n)
{
	__u32 zero = 0, cpu = bpf_get_smp_processor_id();
	__u64 *target = bpf_map_lookup_elem(&fan_target, &cpu);

	*n = bpf_map_lookup_elem(&sent, &zero);
	if (!target || !*n || **n >= *target)
		return 0;
	return *target - **n;
}

SEC("xdp")
int xdp_fan(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *n, *skip = bpf_map_lookup_elem(&lap_skip, &zero);
	__u64 l = left(&n);

	if (!l || !skip)
		return XDP_DROP;
	*skip = l < FAN_COPIES ? FAN_COPIES - l : 0;
	return bpf_redirect_map(&fan, 0, BPF_F_BROADCAST);
}

SEC("xdp/devmap")
int xdp_fan_out(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *n, *skip = bpf_map_lookup_elem(&lap_skip, &zero);

	if (!skip)
		return XDP_DROP;
	if (*skip) {
		(*skip)--;
		return XDP_DROP;
	}
	if (!left(&n))
		return XDP_DROP;
	(*n)++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
