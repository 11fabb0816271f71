// Package ethtoolname reads the names of the stats drivers report through
// ETH_SS_STATS (`ethtool -S`): the per-queue naming schemes of each driver
// family, mlx5's RMON size buckets, and a name's metric-name fragment.
package ethtoolname

import (
	"strings"
)

// ParseQueue recognises the per-queue naming schemes drivers use in
// `ethtool -S` and returns the stat's name without the queue number and the
// queue number. ok is false for device-wide stats.
//
//	mlx5              rx3_xdp_drop, tx0_xdp_xmit, ch2_poll -> rx_xdp_drop, tx_xdp_xmit, ch_poll
//	veth, virtio_net,
//	ixgbe, ice, igb   rx_queue_0_xdp_packets, tx_queue_3_bytes -> rx_xdp_packets, tx_bytes
//	i40e, iavf        rx-0.packets, tx-3.bytes                 -> rx_packets, tx_bytes
//	bnxt              [0]: rx_ucast_packets                    -> rx_ucast_packets
//	ena               queue_0_rx_cnt                           -> rx_cnt
//	gve               rx_no_buffers_posted[0]                  -> rx_no_buffers_posted
func ParseQueue(name string) (base, queue string, ok bool) {
	// gve: "name[N]"
	if head, found := strings.CutSuffix(name, "]"); found {
		if i := strings.LastIndexByte(head, '['); i > 0 {
			if q, tail, found := cutDigits(head[i+1:]); found && tail == "" {
				return head[:i], q, true
			}
		}
		return "", "", false
	}
	// bnxt: "[N]: name"
	if rest, found := strings.CutPrefix(name, "["); found {
		if q, tail, found := cutDigits(rest); found {
			if b, found := strings.CutPrefix(tail, "]: "); found && b != "" {
				return b, q, true
			}
		}
		return "", "", false
	}
	for _, dir := range [...]string{"rx", "tx"} {
		rest, found := strings.CutPrefix(name, dir)
		if !found {
			continue
		}
		// i40e: "rx-N.name"
		if r, found := strings.CutPrefix(rest, "-"); found {
			if q, tail, found := cutDigits(r); found {
				if b, found := strings.CutPrefix(tail, "."); found && b != "" {
					return dir + "_" + b, q, true
				}
			}
		}
		// veth, virtio_net, ixgbe, ice: "rx_queue_N_name"
		if r, found := strings.CutPrefix(rest, "_queue_"); found {
			if q, tail, found := cutDigits(r); found {
				if b, found := strings.CutPrefix(tail, "_"); found && b != "" {
					return dir + "_" + b, q, true
				}
			}
		}
	}
	// ena: "queue_N_name"
	if r, found := strings.CutPrefix(name, "queue_"); found {
		if q, tail, found := cutDigits(r); found {
			if b, found := strings.CutPrefix(tail, "_"); found && b != "" {
				return b, q, true
			}
		}
	}
	// mlx5: "rxN_name", "txN_name", "chN_name"
	for _, dir := range [...]string{"rx", "tx", "ch"} {
		if r, found := strings.CutPrefix(name, dir); found {
			if q, tail, found := cutDigits(r); found {
				if b, found := strings.CutPrefix(tail, "_"); found && b != "" {
					return dir + "_" + b, q, true
				}
			}
		}
	}
	return "", "", false
}

// cutDigits splits s after its leading decimal digits; found is false when
// there are none. Leading zeros ("rx-01") are not a queue number.
func cutDigits(s string) (digits, rest string, found bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || (i > 1 && s[0] == '0') {
		return "", s, false
	}
	return s[:i], s[i:], true
}

// Sanitize turns a driver's stat name into a metric-name fragment:
// lower case, every run of characters outside [a-z0-9] becomes one '_', and
// no '_' at either end. It returns "" when nothing usable is left.
func Sanitize(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	pendingSep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		default:
			pendingSep = true
			continue
		}
		if pendingSep && b.Len() > 0 {
			b.WriteByte('_')
		}
		pendingSep = false
		b.WriteByte(c)
	}
	return b.String()
}

// PhyRxSize recognises mlx5's RMON size buckets, rx_64_bytes_phy and
// rx_65_to_127_bytes_phy, and returns the size label ("64", "65_to_127").
func PhyRxSize(name string) (string, bool) {
	mid, found := strings.CutPrefix(name, "rx_")
	if !found {
		return "", false
	}
	if mid, found = strings.CutSuffix(mid, "_bytes_phy"); !found {
		return "", false
	}
	lo, rest, found := cutDigits(mid)
	if !found {
		return "", false
	}
	if rest == "" {
		return lo, true
	}
	if hi, found := strings.CutPrefix(rest, "_to_"); found {
		if _, tail, found := cutDigits(hi); found && tail == "" {
			return mid, true
		}
	}
	return "", false
}

// Stat is one stat name as ParseAll reads it.
type Stat struct {
	Name string
	// Base is the name without its queue number, Queue that number, for a
	// per-queue stat; Base is the name for a device-wide one.
	Base, Queue string
	PerQueue    bool
}

// ParseAll parses a driver's stat names and says which bases have a
// per-queue form, where a device-wide stat of the same base is its sum.
func ParseAll(names []string) (stats []Stat, hasPerQueue map[string]bool) {
	stats = make([]Stat, len(names))
	hasPerQueue = map[string]bool{}
	for i, n := range names {
		if base, q, ok := ParseQueue(n); ok {
			stats[i] = Stat{Name: n, Base: base, Queue: q, PerQueue: true}
			hasPerQueue[base] = true
		} else {
			stats[i] = Stat{Name: n, Base: n}
		}
	}
	return stats, hasPerQueue
}
