package collector

import (
	"fmt"
	"net"
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
