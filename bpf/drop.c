//go:build ignore

// The drop collector's program: every skb the kernel frees as dropped
// (skb:kfree_skb, which carries an enum skb_drop_reason since Linux 5.17),
// counted per device and reason. Freed skbs that were consumed, not
// dropped, go to skb:consume_skb and are not seen here.
//
// The counters are a slot table (slots.h) keyed by device and reason: k0
// is the inode of the device's network namespace (NO_DEVICE for an skb
// without one), k1 is SLOT_K1 | ifindex << 32 | reason. A drop costs a
// few inlined array loads and one per-CPU increment, no hash lookup; the
// device's name is written once, by the drop that claims the slot, for
// devices of namespaces the exporter cannot name itself.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "slots.h"

// Room for every reason of a current kernel (about 120) on 16 devices, or
// the few reasons a host sees on many more.
#define DROP_SLOTS 2048

// k0 of a drop whose skb has no device (freed on a socket's or a qdisc's
// path after skb->dev was cleared or reused). A namespace's inode is a
// proc inode, allocated from 0xF0000000 (PROC_DYNAMIC_FIRST) or one of
// the fixed ones just below it: none is 1.
#define NO_DEVICE 1

SLOT_TABLE(drops, DROP_SLOTS, __u64);

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
	__u64 netns = NO_DEVICE;
	__u32 ifindex = 0;
	bool claimed = false;
	__u64 *n;
	int idx;

	// skb->dev shares a union with dev_scratch, which UDP sockets use
	// for their queued skbs: a value that is not a device reads as zero
	// through the BTF pointer (the load is faulting-safe), and counts as
	// no device.
	if (dev) {
		__u64 ns = dev->nd_net.net->ns.inum;

		if (ns) {
			netns = ns;
			ifindex = dev->ifindex;
		}
	}
	idx = slot_find(&drops_owners, &drops_claims, DROP_SLOTS, netns,
			SLOT_K1 | (__u64)ifindex << 32 | reason, &claimed);
	if (idx < 0) {
		__u32 zero = 0;

		n = bpf_map_lookup_elem(&drop_untracked, &zero);
		if (n)
			(*n)++;
		return 0;
	}
	if (claimed && netns != NO_DEVICE) {
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
