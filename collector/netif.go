package collector

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// interfaceNames maps ifindex to name in the exporter's network namespace,
// the namespace the netdev family and the BPF programs' ifindexes refer
// to; one netlink dump per call.
func interfaceNames() (map[uint32]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	out := make(map[uint32]string, len(ifs))
	for _, i := range ifs {
		out[uint32(i.Index)] = i.Name
	}
	return out, nil
}

// kernelBTF loads the running kernel's BTF, which the tp_btf programs of
// the xdp and napi collectors are typed and relocated against; without it
// the error says so once, instead of every program failing on its own.
func kernelBTF(collector string) (*btf.Spec, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, Unsupported("kernel BTF (/sys/kernel/btf/vmlinux) unavailable; the %s collector's tp_btf programs need a kernel built with CONFIG_DEBUG_INFO_BTF: %w", collector, err)
	}
	return spec, nil
}

// ownNetns returns the inode of the exporter's network namespace, which
// the BPF programs record with every device.
func ownNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("reading the exporter's network namespace: %w", err)
	}
	return st.Ino, nil
}
