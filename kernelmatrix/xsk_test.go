package kernelmatrix

import (
	"strconv"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// AF_XDP socket geometry: a UMEM of umemChunks frames, small rings so that
// a thousand frames overflow them.
const (
	umemChunks = 256
	chunkSize  = 2048
	ringSize   = 64 // rx, fill and completion
)

// xsk is a real AF_XDP socket bound to one queue of a device, in copy
// mode (veth has no zero-copy), with a UMEM and its fill, completion and
// RX rings. Nothing in the Go ecosystem that fits sets these up (the AF_XDP
// libraries are unmaintained), so the setsockopt calls are made here by
// hand, as the kernel's Documentation/networking/af_xdp.rst describes.
type xsk struct {
	fd    int
	inode uint64
	umem  []byte
	fill  []byte
	off   unix.XDPMmapOffsets
}

func openXSK(t *testing.T, ifindex, queue int) *xsk {
	t.Helper()
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	testenv.Check(t, err, "AF_XDP socket")
	s := &xsk{fd: fd}
	t.Cleanup(func() { unix.Close(fd) })
	s.umem, err = unix.Mmap(-1, 0, umemChunks*chunkSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(s.umem) })
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))), Len: uint64(len(s.umem)), Size: chunkSize}
	setsockopt(t, fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg))
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING} {
		n := uint32(ringSize)
		setsockopt(t, fd, opt, unsafe.Pointer(&n), unsafe.Sizeof(n))
	}
	getsockopt(t, fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&s.off), unsafe.Sizeof(s.off))
	s.fill, err = unix.Mmap(fd, unix.XDP_UMEM_PGOFF_FILL_RING, int(s.off.Fr.Desc)+ringSize*8,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatalf("mapping the fill ring: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(s.fill) })
	if err := unix.Bind(fd, &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(ifindex), QueueID: uint32(queue)}); err != nil {
		t.Fatalf("binding the AF_XDP socket to ifindex %d queue %d: %v", ifindex, queue, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	s.inode = st.Ino
	return s
}

// give puts n UMEM chunks in the fill ring for the kernel to receive into.
func (s *xsk) give(n int) {
	prod := (*uint32)(unsafe.Pointer(&s.fill[s.off.Fr.Producer]))
	p := atomic.LoadUint32(prod)
	for i := range n {
		slot := (p + uint32(i)) % ringSize
		*(*uint64)(unsafe.Pointer(&s.fill[int(s.off.Fr.Desc)+int(slot)*8])) = uint64(i * chunkSize)
	}
	atomic.StoreUint32(prod, p+uint32(n))
}

// stats is the socket's own XDP_STATISTICS.
func (s *xsk) stats(t *testing.T) unix.XDPStatistics {
	t.Helper()
	var st unix.XDPStatistics
	getsockopt(t, s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st))
	return st
}

func setsockopt(t *testing.T, fd, opt int, p unsafe.Pointer, n uintptr) {
	t.Helper()
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		t.Fatalf("setsockopt(SOL_XDP, %d): %v", opt, e)
	}
}

func getsockopt(t *testing.T, fd, opt int, p unsafe.Pointer, n uintptr) {
	t.Helper()
	size := uint32(n)
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
		t.Fatalf("getsockopt(SOL_XDP, %d): %v", opt, e)
	}
}

// attachXSKRedirect attaches to ifindex an XDP program that redirects every
// frame to the XSKMAP entry of its RX queue, and puts the socket there.
func attachXSKRedirect(t *testing.T, ifindex int, s *xsk) {
	t.Helper()
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	testenv.Check(t, err, "XSKMAP")
	t.Cleanup(func() { xsks.Close() })
	if err := xsks.Put(uint32(0), uint32(s.fd)); err != nil {
		t.Fatalf("putting the socket in the XSKMAP: %v", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, 16, asm.Word), // ctx->rx_queue_index
			asm.LoadMapPtr(asm.R1, xsks.FD()),
			asm.Mov.Imm(asm.R3, 0), // XDP_ABORTED when the queue has no socket
			asm.FnRedirectMap.Call(),
			asm.Return(),
		},
	})
	testenv.Check(t, err, "XSKMAP redirect program")
	defer prog.Close()
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
	testenv.Check(t, err, "attaching the XSKMAP redirect program")
	t.Cleanup(func() { l.Close() })
}

// TestXSKRealSocket opens a real AF_XDP socket on a veth queue and makes
// it drop on purpose, first with an empty fill ring, then with a full RX
// ring, and checks after each that the default exporter's xsk metrics
// equal the socket's own XDP_STATISTICS and ring sizes. It needs the
// kernel's xsk_diag (CONFIG_XDP_SOCKETS_DIAG): where the exporter says the
// kernel lacks it, the test ends there; the kernel matrix requires it to
// pass on Debian's 6.12, which has the module.
func TestXSKRealSocket(t *testing.T) {
	testenv.Privileged(t)
	pair := vethtest.Pair(t, 1)
	s := openXSK(t, pair.Host.Index, 0)
	attachXSKRedirect(t, pair.Host.Index, s)
	e := exportertest.Run(t, exportertest.FreeAddr(t))
	mfs := exportertest.Parse(t, e.Scrape(t))
	if mfs.Values("xdp_scrape_collector_unsupported", "collector")["xsk"] == 1 {
		t.Skipf("this kernel has no AF_XDP socket diag (xsk_diag); the exporter says so:\n%s", e.Stderr)
	}
	inode := strconv.FormatUint(s.inode, 10)

	check := func(phase string) unix.XDPStatistics {
		t.Helper()
		before := s.stats(t)
		mfs := exportertest.Parse(t, e.Scrape(t))
		if after := s.stats(t); after != before {
			t.Fatalf("%s: the socket's counters moved during the scrape: %+v, then %+v", phase, before, after)
		}
		for metric, want := range map[string]uint64{
			"xdp_xsk_rx_dropped_total":                     before.Rx_dropped,
			"xdp_xsk_rx_invalid_descriptors_total":         before.Rx_invalid_descs,
			"xdp_xsk_rx_ring_full_total":                   before.Rx_ring_full,
			"xdp_xsk_rx_fill_ring_empty_descriptors_total": before.Rx_fill_ring_empty_descs,
			"xdp_xsk_tx_invalid_descriptors_total":         before.Tx_invalid_descs,
			"xdp_xsk_tx_ring_empty_descriptors_total":      before.Tx_ring_empty_descs,
		} {
			if got, _ := mfs.Sum(metric, "inode", inode); got != float64(want) {
				t.Errorf("%s: %s = %v, the socket's XDP_STATISTICS say %d", phase, metric, got, want)
			}
		}
		for ring, want := range map[string]float64{"rx": ringSize, "fill": ringSize, "completion": ringSize} {
			if got := mfs.Value(t, "xdp_xsk_ring_entries", "inode", inode, "ring", ring); got != want {
				t.Errorf("%s: xdp_xsk_ring_entries{ring=%q} = %v, want %v", phase, ring, got, want)
			}
		}
		if got := mfs.Values("xdp_xsk_rx_dropped_total", "device")[pair.Host.Name]; got != float64(before.Rx_dropped) {
			t.Errorf("%s: the socket is not labelled with device %s", phase, pair.Host.Name)
		}
		return before
	}

	// No buffer in the fill ring: every frame is dropped for want of one.
	const n = 1000
	vethtest.SendExactly(t, pair, n)
	st := check("empty fill ring")
	if st.Rx_fill_ring_empty_descs == 0 || st.Rx_dropped == 0 {
		t.Errorf("an empty fill ring dropped nothing: %+v", st)
	}

	// Buffers for every frame, but nobody reads the RX ring: it fills after
	// ringSize frames, and the rest find it full.
	s.give(ringSize)
	vethtest.SendExactly(t, pair, n)
	st2 := check("full RX ring")
	if st2.Rx_ring_full == 0 && st2.Rx_dropped == st.Rx_dropped {
		t.Errorf("a full RX ring dropped nothing: %+v", st2)
	}
}
