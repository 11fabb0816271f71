package top

import (
	"cmp"
	"slices"
)

// drop is dropwatch's view: packets the stack dropped per second, by
// reason and device, the largest first.
func (v viewCtx) drop() string {
	if !v.cur.Has("xdp_drop_untracked_total") {
		return needs("drop", "xdp_drop_packets_total")
	}
	rows := byLabels(v.rates("xdp_drop_packets_total"), "reason", "device")
	slices.SortStableFunc(rows, func(a, b Series) int { return cmp.Compare(b.Value, a.Value) })
	t := newTable()
	t.row("reason", "device", "drops/s")
	for _, s := range rows {
		device := s.Labels["device"]
		if device == "" {
			device = "(none)"
		}
		t.row(s.Labels["reason"], device, pps(s.Value))
	}
	if untracked := sum(v.rates("xdp_drop_untracked_total")); untracked > 0 {
		t.row("(untracked: the collector's table is full)", "", pps(untracked))
	}
	return t.String()
}
