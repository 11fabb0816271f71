// SPDX-License-Identifier: GPL-2.0-only

// Slot tables: exact per-key counters for tracepoint programs without a
// hash lookup on the hot path.
//
// A table is two maps of the same size: an ARRAY of struct slot_owner (the
// key each slot counts for, shared by all CPUs) and a PERCPU_ARRAY of
// values at the same index. An event hashes its key to a start slot and
// probes up to SLOT_PROBES slots. Finding its key costs a few inlined array
// loads and compares; a per-CPU hash map would cost a helper call, a jhash
// of the key and a bucket walk on every event. A free slot is claimed once,
// by inserting its index into the table's claims hash with BPF_NOEXIST:
// the kernel admits one insert per key, so two CPUs can never count
// different keys in one slot. (A compare-and-swap on the owner would claim
// in one instruction, but BPF_CMPXCHG needs Linux 5.12 and the verifier of
// 5.10 rejects it; the helper call works on every kernel and runs once per
// key, never per event.) The owner's words are written after the claim:
// an event that sees a claim in progress probes on and may claim a second
// slot for the same key, which userspace adds up with the first. When
// every probed slot belongs to other keys the event is counted as
// untracked by the caller. Userspace frees a slot by zeroing its values,
// clearing its owner and deleting its claim.
//
// A key is a struct of its table's own (its fields named, so bpf2go
// generates it for Go) of 16 bytes, read here as two 64-bit words,
// neither of them 0: 0 in the first marks a free slot, and 0 in the
// second a slot whose claim is still in progress, which matches no key.
// Each key type puts a network namespace inode, an ifindex or a map id
// (never 0) in its first word; a key whose other fields can all be 0 ends
// with a field in_use, always 1.

#ifndef XDP_EXPORTER_SLOTS_H
#define XDP_EXPORTER_SLOTS_H

#define SLOT_PROBES 4

// The words of a key.
struct slot_owner {
	__u64 k0; // 0: free
	__u64 k1; // 0: claim in progress
};

// slot_hash spreads a key over a power-of-two table (a 64-bit
// multiplicative hash of both words).
static __always_inline __u32 slot_hash(__u64 k0, __u64 k1)
{
	__u64 h = (k0 ^ (k1 * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;

	return h >> 32;
}

// SLOT_CLAIMS declares the claims hash of a table of slots entries.
#define SLOT_CLAIMS(name, slots)                  \
	struct {                                  \
		__uint(type, BPF_MAP_TYPE_HASH);  \
		__uint(max_entries, slots);       \
		__type(key, __u32);               \
		__type(value, __u64);             \
	} name SEC(".maps")

// SLOT_TABLE declares a slot table: NAME_owners (of key_type, 16 bytes),
// NAME_claims and the per-CPU values NAME, all of SLOTS entries (a power
// of two).
#define SLOT_TABLE(name, slots, key_type, value_type)            \
	_Static_assert(sizeof(key_type) == sizeof(struct slot_owner), \
		       #key_type " is not two words");            \
	struct {                                                  \
		__uint(type, BPF_MAP_TYPE_ARRAY);                 \
		__uint(max_entries, slots);                       \
		__type(key, __u32);                               \
		__type(value, key_type);                          \
	} name##_owners SEC(".maps");                             \
	SLOT_CLAIMS(name##_claims, slots);                        \
	struct {                                                  \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);          \
		__uint(max_entries, slots);                       \
		__type(key, __u32);                               \
		__type(value, value_type);                        \
	} name SEC(".maps")

// A device's name as a program records it, once per slot, for devices
// of namespaces userspace cannot name itself: net_device.name as two
// words.
struct dev_name {
	__u64 dev[2];
};

// slot_find returns the index of the slot that counts key (a key type of
// the table) in a table of nslots (a power of two) owners, claiming a free
// one on first use (then *claimed is set), or -1 when the probed slots all
// belong to other keys.
static __always_inline int slot_find(void *owners, void *claims, __u32 nslots, const void *key, bool *claimed)
{
	__u64 k0 = ((const struct slot_owner *)key)->k0;
	__u64 k1 = ((const struct slot_owner *)key)->k1;
	__u32 start = slot_hash(k0, k1);

#pragma unroll
	for (__u32 i = 0; i < SLOT_PROBES; i++) {
		__u32 idx = (start + i) & (nslots - 1);
		struct slot_owner *o = bpf_map_lookup_elem(owners, &idx);

		if (!o)
			return -1;
		if (o->k0 == k0 && o->k1 == k1)
			return idx;
		if (o->k0 == 0 && bpf_map_update_elem(claims, &idx, &k0, BPF_NOEXIST) == 0) {
			o->k0 = k0;
			o->k1 = k1;
			*claimed = true;
			return idx;
		}
	}
	return -1;
}

#endif
