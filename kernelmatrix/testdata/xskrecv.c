// SPDX-License-Identifier: Apache-2.0

// xskrecv is an AF_XDP application as users write them with libxdp: one
// socket on one RX queue, created with libxdp's default configuration, so
// libxdp loads its default program (xsk_def_prog, through its dispatcher
// where the kernel allows freplace) and puts the socket in that program's
// XSKMAP. It fills the UMEM's fill ring, prints "ready", counts every frame
// the RX ring hands it, giving the buffer back at once, and when its
// standard input closes prints "received N" and deletes the socket, which
// makes libxdp remove its program. The test (TestXSKDefaultProgram) builds
// it with the system's cc and libxdp: no Go library drives libxdp.
//
// Usage: xskrecv DEVICE QUEUE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xdp/xsk.h>

// One UMEM frame per fill ring entry: every frame is in the fill ring or
// the RX ring, and goes back to the fill ring as soon as it is counted.
#define FRAMES XSK_RING_PROD__DEFAULT_NUM_DESCS
#define FRAME_SIZE XSK_UMEM__DEFAULT_FRAME_SIZE
#define BATCH 64

static void refill(struct xsk_ring_prod *fill, const __u64 *addrs, __u32 n)
{
	__u32 idx;

	while (xsk_ring_prod__reserve(fill, n, &idx) != n)
		;
	for (__u32 i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(fill, idx + i) = addrs[i];
	xsk_ring_prod__submit(fill, n);
}

int main(int argc, char **argv)
{
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp, rx;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	unsigned long long received = 0;
	__u64 addrs[FRAMES];
	void *area;
	int err;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE QUEUE\n", argv[0]);
		return 2;
	}
	area = mmap(NULL, (size_t)FRAMES * FRAME_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	err = xsk_umem__create(&umem, area, (__u64)FRAMES * FRAME_SIZE, &fill, &comp, NULL);
	if (err) {
		fprintf(stderr, "xsk_umem__create: %s\n", strerror(-err));
		return 1;
	}
	err = xsk_socket__create(&xsk, argv[1], (__u32)atoi(argv[2]), umem, &rx, NULL, NULL);
	if (err) {
		fprintf(stderr, "xsk_socket__create on %s queue %s: %s\n", argv[1], argv[2], strerror(-err));
		return 1;
	}
	for (__u32 i = 0; i < FRAMES; i++)
		addrs[i] = (__u64)i * FRAME_SIZE;
	refill(&fill, addrs, FRAMES);
	printf("ready\n");
	fflush(stdout);

	struct pollfd fds[2] = {{.fd = xsk_socket__fd(xsk), .events = POLLIN}, {.fd = STDIN_FILENO, .events = POLLIN}};
	for (;;) {
		if (poll(fds, 2, -1) < 0 && errno != EINTR) {
			perror("poll");
			return 1;
		}
		__u32 idx, n = xsk_ring_cons__peek(&rx, BATCH, &idx);
		for (__u32 i = 0; i < n; i++)
			addrs[i] = xsk_ring_cons__rx_desc(&rx, idx + i)->addr;
		xsk_ring_cons__release(&rx, n);
		if (n > 0)
			refill(&fill, addrs, n);
		received += n;
		if (n == 0 && fds[1].revents) {
			char c;
			if (read(STDIN_FILENO, &c, 1) <= 0)
				break;
		}
	}
	printf("received %llu\n", received);
	xsk_socket__delete(xsk);
	xsk_umem__delete(umem);
	return 0;
}
