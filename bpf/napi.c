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
// Each program runs once per poll or per softirq, never per packet, and
// touches only per-CPU maps: no atomics.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

// Histogram buckets: one per work value 0..NAPI_MAX_WORK, then one for
// anything larger (drivers and busy polling may use budgets above 64).
#define NAPI_MAX_WORK 64
#define NAPI_BUCKETS (NAPI_MAX_WORK + 1)

// Execution contexts of a poll; collector/napi.go names them.
enum napi_ctx {
	CTX_OTHER = 0,  // any other task: softirq run on irq exit or on
	                // local_bh_enable in a user or kernel task, busy polling
	CTX_IDLE = 1,   // the idle task (pid 0): softirq on irq exit while idle
	CTX_KSOFTIRQD = 2, // softirq deferred to ksoftirqd/N
	CTX_THREADED = 3,  // a threaded-NAPI kthread, napi/<dev>-<id>
};

struct napi_key {
	char dev[16];  // net_device.name at poll time
	__u32 netns;   // inode number of the device's network namespace
	__u32 ctx;     // enum napi_ctx
};

struct napi_val {
	__u64 polls[NAPI_BUCKETS]; // polls[w]: polls that did w packets of work
	__u64 big_polls;           // polls with work > NAPI_MAX_WORK
	__u64 big_work;            // total work of those
	__u64 exhausted;           // work == budget
	__u64 over_budget;         // work > budget
};

// Per-CPU so the update needs no atomics; NO_PREALLOC because each entry
// is NAPI_BUCKETS+4 words per CPU and only the devices that actually poll
// need one. Bounded: when full, polls of new devices are counted in
// napi_dropped instead.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct napi_key);
	__type(value, struct napi_val);
} napi_hist SEC(".maps");

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

static __always_inline __u32 poll_context(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 head;

	if (task->pid == 0)
		return CTX_IDLE;
	head = *(__u64 *)task->comm;
	if (head == COMM_KSOFTIRQ && task->comm[8] == 'd' && task->comm[9] == '/')
		return CTX_KSOFTIRQD;
	if ((head & MASK_5) == COMM_NAPI)
		return CTX_THREADED;
	return CTX_OTHER;
}

static const struct napi_val zero_val;

SEC("tp_btf/napi_poll")
int BPF_PROG(napi_poll, struct napi_struct *napi, int work, int budget)
{
	struct napi_key key = {};
	struct net_device *dev = napi->dev;
	struct napi_val *v;

	// Two direct loads through the BTF pointer instead of a
	// bpf_probe_read_kernel call: the verifier turns them into faulting-
	// safe loads, and the poll path stays free of helper calls here.
	*(__u64 *)&key.dev[0] = *(__u64 *)&dev->name[0];
	*(__u64 *)&key.dev[8] = *(__u64 *)&dev->name[8];
	key.netns = dev->nd_net.net->ns.inum;
	key.ctx = poll_context();

	v = bpf_map_lookup_elem(&napi_hist, &key);
	if (!v) {
		// First poll of this device in this context; another CPU may race
		// us to the insert, which is fine: per-CPU values start at zero.
		bpf_map_update_elem(&napi_hist, &key, &zero_val, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&napi_hist, &key);
		if (!v) {
			__u32 zero = 0;
			__u64 *d = bpf_map_lookup_elem(&napi_dropped, &zero);

			if (d)
				(*d)++;
			return 0;
		}
	}
	if (work >= 0 && work <= NAPI_MAX_WORK) {
		v->polls[work]++;
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

#define NR_VEC 10 // NR_SOFTIRQS; the names are in collector/napi.go

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
