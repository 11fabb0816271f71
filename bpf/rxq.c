//go:build ignore

// The rxq program: the counters of samples/bpf xdp_rxq_info as a
// long-running XDP program. Per packet it does one inlined per-CPU array
// lookup and two increments, and then returns a verdict fixed at load time.
//
// The configuration lives in read-only globals (.rodata) that the loader
// rewrites before loading, so the verifier sees constants and removes the
// branches of the actions and options not chosen: the monitor (pass,
// no read) pays for nothing but the counting.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define ETH_ALEN 6 // a macro in linux/if_ether.h, so not in vmlinux.h

// Why a packet was not counted per queue; keys of the issues map.
enum rxq_issue {
	RXQ_ISSUE_IFINDEX = 0, // ctx->ingress_ifindex is not the device loaded for
	RXQ_ISSUE_QUEUE = 1,   // ctx->rx_queue_index beyond the rxq_stats slots
	RXQ_ISSUE_MAX,
};

// rxq_rec is one queue's count on one CPU.
struct rxq_rec {
	__u64 packets;
	__u64 bytes;
};

// Indexed by ctx->rx_queue_index. The loader sizes it to the device's RX
// queue count; 256 is the size the object declares.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct rxq_rec);
} rxq_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RXQ_ISSUE_MAX);
	__type(key, __u32);
	__type(value, __u64);
} rxq_issues SEC(".maps");

// The redirect target, slot 0, filled by the loader for the redirect action.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rxq_redirect SEC(".maps");

// Set by the loader. cfg_action is an XDP action: XDP_PASS, XDP_DROP,
// XDP_TX (with a MAC swap so the frame goes back where it came from) or
// XDP_REDIRECT (into rxq_redirect slot 0).
volatile const __u32 cfg_ifindex = 0;
volatile const __u32 cfg_action = XDP_PASS;
// cfg_read makes the program read the Ethernet header before the verdict,
// xdp_rxq_info's --read: the cost of touching packet data (a cache miss
// when the NIC did not place the frame in the CPU cache).
volatile const bool cfg_read = false;

static __always_inline void count_issue(__u32 key)
{
	__u64 *n = bpf_map_lookup_elem(&rxq_issues, &key);

	if (n)
		(*n)++;
}

static __always_inline void swap_mac(struct ethhdr *eth)
{
	unsigned char tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

SEC("xdp")
int xdp_rxq(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 key = ctx->rx_queue_index;
	struct rxq_rec *rec;

	if (ctx->ingress_ifindex != cfg_ifindex) {
		count_issue(RXQ_ISSUE_IFINDEX);
	} else if ((rec = bpf_map_lookup_elem(&rxq_stats, &key))) {
		rec->packets++;
		rec->bytes += data_end - data;
	} else {
		count_issue(RXQ_ISSUE_QUEUE);
	}

	if (cfg_read || cfg_action == XDP_TX) {
		struct ethhdr *eth = data;

		// A runt frame cannot be read or turned around; the stack
		// drops it.
		if ((void *)(eth + 1) > data_end)
			return XDP_PASS;
		if (cfg_read)
			(void)*(volatile __be16 *)&eth->h_proto;
		if (cfg_action == XDP_TX)
			swap_mac(eth);
	}
	if (cfg_action == XDP_REDIRECT)
		return bpf_redirect_map(&rxq_redirect, 0, 0);
	return cfg_action;
}

char LICENSE[] SEC("license") = "GPL";
