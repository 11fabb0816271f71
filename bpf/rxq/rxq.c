// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// The rxq program: the counters of samples/bpf xdp_rxq_info as a
// long-running XDP program. Per packet it reads the CPU number and the RX
// queue, increments two counters at an address computed from them, and
// returns a verdict fixed at load time.
//
// Each verdict, with and without reading the packet, is its own program,
// and the sizes and options live in read-only globals (.rodata) that the
// loader sets before loading: the monitor (pass, no read) pays for nothing
// but the counting.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define ETH_ALEN 6 // a macro in linux/if_ether.h, so not in vmlinux.h

// rxq_rec is one queue's count on one CPU.
struct rxq_rec {
	__u64 packets;
	__u64 bytes;
};

// The counters: one row per CPU, rxq_counts[cpu][slot], where slots
// [0, cfg_queues) are the RX queues, slot cfg_queues counts packets from a
// higher ctx->rx_queue_index (issue queue_out_of_range) and slot
// cfg_queues + 1 the packets of another device (issue ifindex_mismatch,
// only in the _ifindex programs).
//
// A global array rather than a per-CPU map: the program reaches it at an
// address fixed at load time (no lookup) and indexes it by the CPU number,
// which the JIT inlines. Each CPU writes only its own row, and XDP does not
// nest on a CPU, so the plain increments are exact, as in a per-CPU map;
// rows are whole, aligned cache lines, so CPUs do not share one.
//
// The loader sizes the section's map to the rows it needs: cfg_cpu_mask + 1
// rows (a power of two covering the possible CPUs, so the mask bounds the
// index) of 1 << cfg_row_shift bytes (a power of two of at least a cache
// line that holds every slot). The size declared here is one row, for the
// compiler; the verifier checks the index against the loaded size.
struct rxq_rec rxq_counts[4] SEC(".data.rxq_counts") __attribute__((aligned(64), visibility("hidden")));

// The device of the _ifindex programs.
volatile const __u32 cfg_ifindex = 0;
// The counters' layout (see rxq_counts), set by the loader.
volatile const __u32 cfg_queues = 1;
volatile const __u32 cfg_cpu_mask = 0;
volatile const __u32 cfg_row_shift = 6;

// The redirect target, slot 0, filled by the loader for the redirect action.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} rxq_redirect SEC(".maps");

static __always_inline void swap_mac(struct ethhdr *eth)
{
	unsigned char tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

// rxq counts the packet and returns action. action, read and
// check_ifindex are compile-time constants: each combination is its own
// program below, and
// the loader loads only the one configured, so the program holds no code
// and no configuration loads for the options not chosen (a read-only
// global would leave its loads in the JITed code even where the verifier
// prunes the branches).
static __always_inline int rxq(struct xdp_md *ctx, const __u32 action, const bool read,
			       const bool check_ifindex)
{
	// The CPU first: the helper call clobbers r1-r5, so only ctx has to
	// live across it.
	__u32 cpu = bpf_get_smp_processor_id() & cfg_cpu_mask;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 queues = cfg_queues;
	__u32 slot = ctx->rx_queue_index;
	struct rxq_rec *rec;

	if (slot >= queues)
		slot = queues; // the queue_out_of_range slot
	if (check_ifindex && ctx->ingress_ifindex != cfg_ifindex)
		slot = queues + 1; // the ifindex_mismatch slot
	rec = (void *)rxq_counts + (cpu << cfg_row_shift) + slot * sizeof(*rec);
	rec->packets++;
	rec->bytes += data_end - data;

	if (read || action == XDP_TX) {
		struct ethhdr *eth = data;

		// A runt frame cannot be read or turned around; the stack
		// drops it.
		if ((void *)(eth + 1) > data_end)
			return XDP_PASS;
		if (read)
			(void)*(volatile __be16 *)&eth->h_proto;
		if (action == XDP_TX)
			swap_mac(eth);
	}
	if (action == XDP_REDIRECT)
		return bpf_redirect_map(&rxq_redirect, 0, 0);
	return action;
}

// The programs, named xdp_rxq_<action>[_read][_ifindex]: XDP_TX swaps the
// MAC addresses so the frame goes back where it came from, XDP_REDIRECT
// sends it into rxq_redirect slot 0; _read reads the Ethernet header
// before the verdict, xdp_rxq_info's --read: the cost of touching packet
// data (a cache miss when the NIC did not place the frame in the CPU
// cache); _ifindex counts packets whose ctx->ingress_ifindex is not
// cfg_ifindex as issues, as xdp_rxq_info does. The collector leaves that
// check off by default: it attaches each program instance to its own
// device only, where the check cannot fire, and it costs a chain of
// dependent loads per packet (xdp_buff -> rxq -> net_device -> ifindex).
#define RXQ_PROG(name, action, read, check_ifindex)           \
	SEC("xdp") int name(struct xdp_md *ctx)               \
	{                                                     \
		return rxq(ctx, action, read, check_ifindex); \
	}

RXQ_PROG(xdp_rxq_pass, XDP_PASS, false, false)
RXQ_PROG(xdp_rxq_pass_read, XDP_PASS, true, false)
RXQ_PROG(xdp_rxq_drop, XDP_DROP, false, false)
RXQ_PROG(xdp_rxq_drop_read, XDP_DROP, true, false)
RXQ_PROG(xdp_rxq_tx, XDP_TX, false, false)
RXQ_PROG(xdp_rxq_tx_read, XDP_TX, true, false)
RXQ_PROG(xdp_rxq_redirect, XDP_REDIRECT, false, false)
RXQ_PROG(xdp_rxq_redirect_read, XDP_REDIRECT, true, false)
RXQ_PROG(xdp_rxq_pass_ifindex, XDP_PASS, false, true)
RXQ_PROG(xdp_rxq_pass_read_ifindex, XDP_PASS, true, true)
RXQ_PROG(xdp_rxq_drop_ifindex, XDP_DROP, false, true)
RXQ_PROG(xdp_rxq_drop_read_ifindex, XDP_DROP, true, true)
RXQ_PROG(xdp_rxq_tx_ifindex, XDP_TX, false, true)
RXQ_PROG(xdp_rxq_tx_read_ifindex, XDP_TX, true, true)
RXQ_PROG(xdp_rxq_redirect_ifindex, XDP_REDIRECT, false, true)
RXQ_PROG(xdp_rxq_redirect_read_ifindex, XDP_REDIRECT, true, true)

char LICENSE[] SEC("license") = "GPL";
