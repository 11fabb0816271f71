// SPDX-License-Identifier: GPL-2.0-only

//go:build ignore

// A user's own XDP program, as the tests attach it with iproute2
// (`ip link set dev DEV xdp obj sized.o sec xdp`): its verdict depends on
// the frame's length, so a test that sends frames of two or three sizes
// knows how many of each verdict it made.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

// Frames shorter than SIZED_DROP_FROM bytes pass, longer ones drop, and
// from SIZED_INVALID_FROM on the program returns SIZED_INVALID_VERDICT,
// which is no XDP verdict (the driver warns and drops the frame).
enum sized {
	SIZED_DROP_FROM = 100,
	SIZED_INVALID_FROM = 200,
	SIZED_INVALID_VERDICT = 7,
};

// The enum's type in the object's BTF, for bpf2go to generate it in Go.
const enum sized sized_type_anchor = SIZED_INVALID_VERDICT;

SEC("xdp")
int xdp_sized(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;

	if (len >= SIZED_INVALID_FROM)
		return SIZED_INVALID_VERDICT;
	if (len >= SIZED_DROP_FROM)
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
