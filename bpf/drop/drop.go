// Package drop is the drop collector's BPF object (drop.c): skb:kfree_skb
// counted per device and drop reason. It loads and attaches the program,
// reads its slot table as typed records, freeing the slots of devices that
// are gone, and names the reasons as the running kernel does (reasons.go).
package drop

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/bpf/slots"
	"github.com/xdp-exporter/xdp_exporter/bpf/tracing"
)

// program is drop.c's program and the arguments it reads: the skb, the
// location (not read) and the reason. Linux 6.11 added rx_sk after them.
var program = tracing.Program{Name: DropProgKfreeSkb,
	Params: []string{"struct sk_buff *", "*", "enum skb_drop_reason"}}

// Objects is the loaded object.
type Objects struct {
	*tracing.Set
	drops *slots.Table[DropDropKey, uint64]
}

// New loads and attaches the program.
func New(logger *slog.Logger) (*Objects, error) {
	spec, err := LoadDrop()
	if err != nil {
		return nil, err
	}
	set, err := tracing.Load(logger, spec, []tracing.Program{program}, func(string) string { return "skb" })
	if err != nil {
		return nil, err
	}
	drops, err := slots.New[DropDropKey, uint64](set.Maps[DropMapDropsOwners], set.Maps[DropMapDropsClaims], set.Maps[DropMapDrops], 0)
	if err != nil {
		return nil, errors.Join(err, set.Close())
	}
	return &Objects{Set: set, drops: drops}, nil
}

// Drops is the count of one device (or none) and reason.
type Drops struct {
	// Device is the skb's device; HasDevice is false for an skb that had
	// none.
	Device    reap.Device
	HasDevice bool
	Reason    uint32
	Count     uint64
	slot      uint32
}

// Read reads the counts, freeing the slots of devices fateOf finds gone.
func (o *Objects) Read(fateOf func(reap.Device) reap.Fate) ([]Drops, error) {
	count := func(e slots.Entry[DropDropKey, uint64]) uint64 {
		var t uint64
		e.Each(func(_ int, n *uint64) { t += *n })
		return t
	}
	entries, err := o.drops.Read(count, func(k DropDropKey) reap.Fate {
		if DropDropNetns(k.Netns) == DropDropNetnsNO_DEVICE {
			return reap.Live
		}
		return fateOf(reap.Device{Ifindex: k.Ifindex, Netns: k.Netns})
	})
	out := make([]Drops, len(entries))
	for i, e := range entries {
		out[i] = Drops{Device: reap.Device{Ifindex: e.Key.Ifindex, Netns: e.Key.Netns},
			HasDevice: DropDropNetns(e.Key.Netns) != DropDropNetnsNO_DEVICE,
			Reason:    e.Key.Reason, Count: count(e), slot: e.Slots[0]}
	}
	return out, err
}

// RecordedName is the name d's device had when its slot was claimed: the
// exporter cannot look up names in another namespace.
func (o *Objects) RecordedName(d Drops) (string, error) {
	var n DropDevName
	if err := o.Maps[DropMapDropNames].Lookup(d.slot, &n); err != nil {
		return "", fmt.Errorf("reading a drop device name: %w", err)
	}
	return slots.DeviceName(n.Dev), nil
}

// Untracked is the drops not counted because every slot probed for their
// key was taken.
func (o *Objects) Untracked() (uint64, error) {
	n, err := slots.Counter(o.Maps[DropMapDropUntracked], 0)
	if err != nil {
		return 0, fmt.Errorf("reading the untracked drop counter: %w", err)
	}
	return n, nil
}

// Spec is the object as compiled.
func Spec() (*ebpf.CollectionSpec, error) { return LoadDrop() }
