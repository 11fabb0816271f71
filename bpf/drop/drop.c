// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// The drop collector's program: every skb the kernel frees as dropped
// (skb:kfree_skb, which carries an enum skb_drop_reason since Linux 5.17),
// counted per device and reason. Freed skbs that were consumed, not
// dropped, go to skb:consume_skb and are not seen here.
//
// The counters are a slot table (slots.h) keyed by device and reason
// (struct drop_key). A drop costs a few inlined array loads and one
// per-CPU increment, no hash lookup; the device's name is written once, by
// the drop that claims the slot, for devices of namespaces the exporter
// cannot name itself.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "slots/slots.h"

// Room for every reason of a current kernel (about 120) on 16 devices, or
// the few reasons a host sees on many more.
#define DROP_SLOTS 2048

// The netns of a drop whose skb has no device (freed on a socket's or a qdisc's
// path after skb->dev was cleared or reused). A namespace's inode is a
// proc inode, allocated from 0xF0000000 (PROC_DYNAMIC_FIRST) or one of
// the fixed ones just below it: none is 1.
enum drop_netns { NO_DEVICE = 1 };

// The enum's type in the object's BTF, for bpf2go to generate it in Go.
const enum drop_netns drop_netns_type_anchor = NO_DEVICE;

struct drop_key {
	__u32 netns; // inode of the device's network namespace, or NO_DEVICE
	__u32 ifindex;
	__u32 reason;
	__u32 in_use; // 1 (slots.h)
};

SLOT_TABLE(drops, DROP_SLOTS, struct drop_key, __u64);

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DROP_SLOTS);
	__type(key, __u32);
	__type(value, struct dev_name);
} drop_names SEC(".maps");

// Drops not counted because every probed slot belonged to other keys.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drop_untracked SEC(".maps");

// The reason is read as the u32 it is stored in: the enum's values differ
// between kernels, and userspace names them from the running kernel's BTF.
// Later kernels add arguments after it (rx_sk in 6.11); they are not read.
SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb, struct sk_buff *skb, void *location, __u32 reason)
{
	struct net_device *dev = skb->dev;
	struct drop_key k = { .netns = NO_DEVICE, .reason = reason, .in_use = 1 };
	bool claimed = false;
	__u64 *n;
	int idx;

	// skb->dev shares a union with dev_scratch, which UDP sockets use
	// for their queued skbs: a value that is not a device reads as zero
	// through the BTF pointer (the load is faulting-safe), and counts as
	// no device.
	if (dev) {
		__u32 ns = dev->nd_net.net->ns.inum;

		if (ns) {
			k.netns = ns;
			k.ifindex = dev->ifindex;
		}
	}
	idx = slot_find(&drops_owners, &drops_claims, DROP_SLOTS, &k, &claimed);
	if (idx < 0) {
		__u32 zero = 0;

		n = bpf_map_lookup_elem(&drop_untracked, &zero);
		if (n)
			(*n)++;
		return 0;
	}
	if (claimed && k.netns != NO_DEVICE) {
		struct dev_name *name = bpf_map_lookup_elem(&drop_names, &idx);

		if (name) {
			name->dev[0] = *(__u64 *)&dev->name[0];
			name->dev[1] = *(__u64 *)&dev->name[8];
		}
	}
	n = bpf_map_lookup_elem(&drops, &idx);
	if (n)
		(*n)++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
