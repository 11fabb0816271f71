// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// The xdp collector's tracepoint programs: the counters of samples/bpf
// xdp_monitor and xdp-tools' xdp-monitor, kept as per-CPU hash maps keyed by
// device, program, action or errno, read and summed by userspace at scrape
// time.
//
// Every program is tp_btf: its arguments are the tracepoint's TP_PROTO
// arguments (include/trace/events/xdp.h), typed by the kernel's BTF, and every
// field read goes through a CO-RE relocation (vmlinux.h applies
// preserve_access_index to every struct), so a change in the layout of
// net_device or bpf_prog is relocated by the loader and a missing field fails
// the load instead of reading the wrong bytes. The order of the arguments
// cannot be relocated: userspace compares each tracepoint's prototype in the
// kernel's BTF with the one these programs were written for before loading
// them.
//
// Each program loads and attaches on its own, so a tracepoint the running
// kernel lacks only loses its own counters (recent kernels, such as 6.18,
// no longer have xdp_redirect_map_err).
//
// No atomics on the counting path: every counter is per-CPU. The transmit
// and cpumap programs, which fire once per bulk on the forwarding path,
// count in slot tables (slots.h): exact per key without a hash lookup, and
// one compare-and-swap per key ever, when its slot is claimed. Exceptions
// and redirect errors, which only fire on failures, keep per-CPU hash maps
// keyed by device, program and action or errno; a key is inserted once
// with BPF_NOEXIST and then incremented in place.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "slots/slots.h"

// A device is its ifindex plus the inode of its network namespace, so equal
// ifindexes in two namespaces stay apart.
struct dev_key {
	__u32 ifindex;
	__u32 netns;
};

struct exception_key {
	struct dev_key dev;
	__u32 prog_id;
	__u32 action; // XDP_ABORTED..XDP_REDIRECT, or ACTION_UNKNOWN
};

struct redirect_key {
	struct dev_key dev;
	__u32 prog_id;
	__s32 err; // 0 for a successful redirect (opt-in program)
};

// Slot table keys (slots.h): their first word is a device or a map id,
// never 0, and in_use keeps the second from being 0.
struct xmit_key {
	struct dev_key from;
	struct dev_key to;
};

struct bulk_key {
	struct dev_key dev;
	__u64 in_use; // 1
};

struct enqueue_key {
	__u32 map_id;
	__u32 to_cpu;
	__u64 in_use; // 1
};

struct kthread_key {
	__u64 map_id;
	__u64 in_use; // 1
};

struct xmit_value {
	__u64 sent;
	__u64 drops;
	__u64 errors; // flushes that returned err != 0
	__u64 bulks;  // flushes (events): bulk average = sent / bulks
};

struct enqueue_value {
	__u64 processed;
	__u64 drops;
	__u64 bulks;
};

// The kthread runs on the cpumap entry's CPU, which is the per-CPU copy the
// value lands in: the key needs only the map.
struct kthread_value {
	__u64 processed;
	__u64 drops;
	__u64 sched;
	__u64 xdp_pass;
	__u64 xdp_drop;
	__u64 xdp_redirect;
	__u64 polls;
};

// Actions above XDP_REDIRECT (invalid verdicts) share one key so a buggy
// program cannot grow the map.
#define ACTION_UNKNOWN (XDP_REDIRECT + 1)

// Indexes of the overflow counter: events not counted because their map
// was full.
enum ovf_map {
	OVF_EXCEPTIONS,
	OVF_REDIRECTS,
	OVF_DEVMAP_XMIT,
	OVF_BULK_TX,
	OVF_CPUMAP_ENQUEUE,
	OVF_CPUMAP_KTHREAD,
	OVF_MAX,
};

// The enum's type in the object's BTF, for bpf2go to generate it in Go.
const enum ovf_map ovf_map_type_anchor = OVF_MAX;

// Map sizes bound the cardinality (documented in docs/collectors/xdp.md);
// they are preallocated, so the memory is max_entries x CPUs x value size.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct exception_key);
	__type(value, __u64);
} exceptions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct redirect_key);
	__type(value, __u64);
} redirects SEC(".maps");

// Keys: devmap_xmit (from device, to device), bulk_tx (device),
// cpumap_enqueue (map id, target CPU), cpumap_kthread (map id).
#define DEVMAP_XMIT_SLOTS 256
#define BULK_TX_SLOTS 256
#define CPUMAP_ENQUEUE_SLOTS 256
#define CPUMAP_KTHREAD_SLOTS 64
SLOT_TABLE(devmap_xmit, DEVMAP_XMIT_SLOTS, struct xmit_key, struct xmit_value);
SLOT_TABLE(bulk_tx, BULK_TX_SLOTS, struct bulk_key, struct xmit_value);
SLOT_TABLE(cpumap_enqueue, CPUMAP_ENQUEUE_SLOTS, struct enqueue_key, struct enqueue_value);
SLOT_TABLE(cpumap_kthread, CPUMAP_KTHREAD_SLOTS, struct kthread_key, struct kthread_value);

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OVF_MAX);
	__type(key, __u32);
	__type(value, __u64);
} overflow SEC(".maps");

static __always_inline void count_overflow(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&overflow, &which);

	if (n)
		(*n)++;
}

// slot returns the calling CPU's value for key, inserting zero the first
// time; NULL (counted as overflow) when the map is full.
static __always_inline void *slot(void *map, const void *key, const void *zero, __u32 ovf)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v)
		count_overflow(ovf);
	return v;
}

static __always_inline struct dev_key dev_key(const struct net_device *dev)
{
	struct dev_key k = {
		.ifindex = dev->ifindex,
		.netns = dev->nd_net.net->ns.inum,
	};
	return k;
}

// table_value returns this CPU's value of the slot for key, or NULL
// (counted as overflow ovf) when no slot could be had.
static __always_inline void *table_value(void *owners, void *claims, __u32 nslots, void *values,
					 const void *key, __u32 ovf)
{
	bool claimed;
	int idx = slot_find(owners, claims, nslots, key, &claimed);

	if (idx < 0) {
		count_overflow(ovf);
		return NULL;
	}
	return bpf_map_lookup_elem(values, &idx);
}

static __always_inline void count_redirect(const struct net_device *dev,
					   const struct bpf_prog *xdp, int err)
{
	struct redirect_key k = {
		.dev = dev_key(dev),
		.prog_id = xdp->aux->id,
		.err = err,
	};
	__u64 zero = 0, *n = slot(&redirects, &k, &zero, OVF_REDIRECTS);

	if (n)
		(*n)++;
}

SEC("tp_btf/xdp_exception")
int BPF_PROG(xdp_exception, const struct net_device *dev,
	     const struct bpf_prog *xdp, __u32 act)
{
	struct exception_key k = {
		.dev = dev_key(dev),
		.prog_id = xdp->aux->id,
		.action = act > XDP_REDIRECT ? ACTION_UNKNOWN : act,
	};
	__u64 zero = 0, *n = slot(&exceptions, &k, &zero, OVF_EXCEPTIONS);

	if (n)
		(*n)++;
	return 0;
}

// xdp_redirect_err and xdp_redirect_map_err share the redirect template; the
// third argument (target) changed type over the years and is not read.
SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(xdp_redirect_err, const struct net_device *dev,
	     const struct bpf_prog *xdp, const void *tgt, int err)
{
	count_redirect(dev, xdp, err);
	return 0;
}

SEC("tp_btf/xdp_redirect_map_err")
int BPF_PROG(xdp_redirect_map_err, const struct net_device *dev,
	     const struct bpf_prog *xdp, const void *tgt, int err)
{
	count_redirect(dev, xdp, err);
	return 0;
}

// Successful redirects fire once per packet: these two programs are attached
// only on request (--collector.xdp.redirect-success).
SEC("tp_btf/xdp_redirect")
int BPF_PROG(xdp_redirect, const struct net_device *dev,
	     const struct bpf_prog *xdp)
{
	count_redirect(dev, xdp, 0);
	return 0;
}

SEC("tp_btf/xdp_redirect_map")
int BPF_PROG(xdp_redirect_map, const struct net_device *dev,
	     const struct bpf_prog *xdp)
{
	count_redirect(dev, xdp, 0);
	return 0;
}

/* One bulk flush (xdp_devmap_xmit, xdp_bulk_tx) into its slot, if it has one. */
static __always_inline void count_flush(struct xmit_value *v, int sent, int drops, int err)
{
	if (!v)
		return;
	v->sent += sent;
	v->drops += drops;
	v->errors += err != 0;
	v->bulks++;
}

SEC("tp_btf/xdp_devmap_xmit")
int BPF_PROG(xdp_devmap_xmit, const struct net_device *from_dev,
	     const struct net_device *to_dev, int sent, int drops, int err)
{
	struct xmit_key k = { .from = dev_key(from_dev), .to = dev_key(to_dev) };

	count_flush(table_value(&devmap_xmit_owners, &devmap_xmit_claims, DEVMAP_XMIT_SLOTS, &devmap_xmit,
				&k, OVF_DEVMAP_XMIT),
		    sent, drops, err);
	return 0;
}

SEC("tp_btf/xdp_bulk_tx")
int BPF_PROG(xdp_bulk_tx, const struct net_device *dev, int sent, int drops, int err)
{
	struct bulk_key k = { .dev = dev_key(dev), .in_use = 1 };

	count_flush(table_value(&bulk_tx_owners, &bulk_tx_claims, BULK_TX_SLOTS, &bulk_tx, &k, OVF_BULK_TX),
		    sent, drops, err);
	return 0;
}

SEC("tp_btf/xdp_cpumap_enqueue")
int BPF_PROG(xdp_cpumap_enqueue, int map_id, unsigned int processed,
	     unsigned int drops, int to_cpu)
{
	struct enqueue_key k = { .map_id = map_id, .to_cpu = to_cpu, .in_use = 1 };
	struct enqueue_value *v = table_value(&cpumap_enqueue_owners, &cpumap_enqueue_claims, CPUMAP_ENQUEUE_SLOTS,
					      &cpumap_enqueue, &k, OVF_CPUMAP_ENQUEUE);

	if (!v)
		return 0;
	v->processed += processed;
	v->drops += drops;
	v->bulks++;
	return 0;
}

SEC("tp_btf/xdp_cpumap_kthread")
int BPF_PROG(xdp_cpumap_kthread, int map_id, unsigned int processed,
	     unsigned int drops, int sched, struct xdp_cpumap_stats *xdp_stats)
{
	struct kthread_key k = { .map_id = (__u32)map_id, .in_use = 1 };
	struct kthread_value *v = table_value(&cpumap_kthread_owners, &cpumap_kthread_claims, CPUMAP_KTHREAD_SLOTS,
					      &cpumap_kthread, &k, OVF_CPUMAP_KTHREAD);

	if (!v)
		return 0;
	v->processed += processed;
	v->drops += drops;
	v->sched += sched != 0;
	v->xdp_pass += xdp_stats->pass;
	v->xdp_drop += xdp_stats->drop;
	v->xdp_redirect += xdp_stats->redirect;
	v->polls++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
