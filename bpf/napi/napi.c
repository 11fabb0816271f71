// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// The napi collector's programs: napi:napi_poll as a histogram of the work
// (packets) each poll did, per device and per execution context, and
// irq:softirq_{entry,exit,raise} as per-CPU, per-vector counts and time.
//
// All four attach as tp_btf, so the kernel checks the arguments against
// TP_PROTO through BTF and every structure read is a CO-RE relocation:
//
//   napi_poll(struct napi_struct *napi, int work, int budget)
//   softirq_entry/softirq_exit/softirq_raise(unsigned int vec_nr)
//
// Each program runs once per poll or per softirq, never per packet. The
// counters are per CPU, so no update needs an atomic; a histogram slot is
// claimed for a new device once, by one hash map insert (slots.h).
// The softirq programs are opt-in (--collector.napi.softirq): they fire
// several times per poll, and the cpu collector reads the same counts
// from /proc/softirqs.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "slots/slots.h"

// Histogram buckets: one per work value 0..NAPI_MAX_WORK, then one for
// anything larger (drivers and busy polling may use budgets above 64).
#define NAPI_MAX_WORK 64
#define NAPI_BUCKETS (NAPI_MAX_WORK + 1)

// Execution contexts of a poll; napi.go names them.
enum napi_ctx {
	CTX_OTHER = 0,  // any other task: softirq run on irq exit or on
	                // local_bh_enable in a user or kernel task, busy polling
	CTX_IDLE = 1,   // the idle task (pid 0): softirq on irq exit while idle
	CTX_KSOFTIRQD = 2, // softirq deferred to ksoftirqd/N
	CTX_THREADED = 3,  // a threaded-NAPI kthread, napi/<dev>-<id>
};

// The enum's type in the object's BTF, for bpf2go to generate it in Go.
const enum napi_ctx napi_ctx_type_anchor = CTX_THREADED;

// The histogram is a slot table (slots.h) keyed by device and context.
// The device's name is written once, by the poll that claims the slot, so
// no poll copies a string; for devices in its own namespace userspace
// shows the current name instead.
#define NAPI_SLOTS 128

struct napi_key {
	__u32 netns; // inode of the device's network namespace
	__u32 ifindex;
	enum napi_ctx context;
	__u32 in_use; // 1 (slots.h)
};

struct napi_val {
	__u64 polls[NAPI_BUCKETS]; // polls[w]: polls that did w packets of work
	__u64 big_polls;           // polls with work > NAPI_MAX_WORK
	__u64 big_work;            // total work of those
	__u64 exhausted;           // work == budget
	__u64 over_budget;         // work > budget
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NAPI_SLOTS);
	__type(key, __u32);
	__type(value, struct napi_key);
} napi_owners SEC(".maps");

SLOT_CLAIMS(napi_claims, NAPI_SLOTS);

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NAPI_SLOTS);
	__type(key, __u32);
	__type(value, struct dev_name);
} napi_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NAPI_SLOTS);
	__type(key, __u32);
	__type(value, struct napi_val);
} napi_hist SEC(".maps");

// Polls not counted because every slot probed for their key was taken.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} napi_dropped SEC(".maps");

// ksoftirqd/ and napi/ as they sit in task_struct.comm on little endian.
#define COMM_KSOFTIRQ 0x71726974666f736bULL // "ksoftirq"
#define COMM_NAPI 0x2f6970616eULL           // "napi/"
#define MASK_5 0xffffffffffULL

// comm_context tells a poll's context from the running task's comm,
// reading its bytes only as far as needed.
static __always_inline __u32 comm_context(const char *comm)
{
	__u64 head = *(const __u64 *)comm;

	if (head == COMM_KSOFTIRQ && comm[8] == 'd' && comm[9] == '/')
		return CTX_KSOFTIRQD;
	if ((head & MASK_5) == COMM_NAPI)
		return CTX_THREADED;
	return CTX_OTHER;
}

static __always_inline __u32 poll_context(void)
{
	// Linux 5.11 and later: direct loads through the BTF-typed current
	// task. Before, there is no such helper (5.10's verifier rejects the
	// program that calls it), and two helpers copy the same fields; the
	// relocation makes the branch a constant, so each kernel's verifier
	// sees, and its JIT compiles, only the branch it can run.
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		struct task_struct *task = bpf_get_current_task_btf();

		if (task->pid == 0)
			return CTX_IDLE;
		return comm_context(task->comm);
	}
	char comm[16];

	if ((__u32)bpf_get_current_pid_tgid() == 0)
		return CTX_IDLE;
	bpf_get_current_comm(comm, sizeof(comm));
	return comm_context(comm);
}

static __always_inline void count_untracked(void)
{
	__u32 zero = 0;
	__u64 *d = bpf_map_lookup_elem(&napi_dropped, &zero);

	if (d)
		(*d)++;
}

SEC("tp_btf/napi_poll")
int BPF_PROG(napi_poll, struct napi_struct *napi, int work, int budget)
{
	struct net_device *dev = napi->dev;
	struct napi_key k = {
		.netns = dev->nd_net.net->ns.inum,
		.ifindex = dev->ifindex,
		.context = poll_context(),
		.in_use = 1,
	};
	bool claimed = false;
	struct napi_val *v;
	int idx;

	idx = slot_find(&napi_owners, &napi_claims, NAPI_SLOTS, &k, &claimed);
	if (idx < 0) {
		count_untracked();
		return 0;
	}
	if (claimed) {
		// The name, once per slot. Two direct loads through the BTF
		// pointer: the verifier makes them faulting-safe, no helper.
		struct dev_name *n = bpf_map_lookup_elem(&napi_names, &idx);

		if (n) {
			n->dev[0] = *(__u64 *)&dev->name[0];
			n->dev[1] = *(__u64 *)&dev->name[8];
		}
	}
	v = bpf_map_lookup_elem(&napi_hist, &idx);
	if (!v)
		return 0;
	// One 64-bit compare bounds the index (a negative work wraps to a
	// large value). The empty asm keeps clang from comparing a copy of
	// work in another register, where the verifier would not see the
	// bound on the index.
	__u64 w = (__u32)work;

	asm volatile("" : "+r"(w));
	if (w <= NAPI_MAX_WORK) {
		v->polls[w]++;
	} else if (work > NAPI_MAX_WORK) {
		v->big_polls++;
		v->big_work += work;
	}
	if (work == budget)
		v->exhausted++;
	else if (work > budget)
		v->over_budget++;
	return 0;
}

#define NR_VEC 10 // NR_SOFTIRQS; the names are in napi.go

struct softirq_val {
	__u64 entries;
	__u64 raises;
	__u64 ns;    // time from entry to exit, summed
	__u64 start; // entry timestamp of the run in progress, 0 if none
};

// Per CPU, indexed by vector. raises is written only by the raise program,
// so a raise in a hard irq that interrupts the entry or exit program on the
// same CPU cannot lose their update; entry and exit share start but never
// interleave on one CPU (softirqs do not nest).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VEC);
	__type(key, __u32);
	__type(value, struct softirq_val);
} softirqs SEC(".maps");

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	struct softirq_val *v = bpf_map_lookup_elem(&softirqs, &vec);

	if (v) {
		v->entries++;
		v->start = bpf_ktime_get_ns();
	}
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	struct softirq_val *v = bpf_map_lookup_elem(&softirqs, &vec);

	if (v) {
		// start is 0 for a softirq that was already running when the
		// entry program attached: its duration is unknown, not counted.
		if (v->start) {
			v->ns += bpf_ktime_get_ns() - v->start;
			v->start = 0;
		}
	}
	return 0;
}

SEC("tp_btf/softirq_raise")
int BPF_PROG(softirq_raise, unsigned int vec)
{
	struct softirq_val *v = bpf_map_lookup_elem(&softirqs, &vec);

	if (v)
		v->raises++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
