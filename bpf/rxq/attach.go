package rxq

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
)

// Attached is a program attached to its device through a bpf_link, so the
// kernel detaches it when the process dies.
type Attached struct {
	*Program
	link   link.Link
	progID ebpf.ProgramID
}

// Attach loads the program for cfg and attaches it to cfg.Ifindex with
// flags (the mode); for XDPRedirect, redirectTo is the target ifindex.
func Attach(cfg Config, flags link.XDPAttachFlags, redirectTo int) (a *Attached, err error) {
	a = &Attached{}
	if a.Program, err = Load(cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Close())
		}
	}()
	if cfg.Action == XDPRedirect {
		if err := a.Redirect.Put(uint32(0), uint32(redirectTo)); err != nil {
			return nil, fmt.Errorf("setting the redirect target: %w", err)
		}
	}
	if a.link, err = link.AttachXDP(link.XDPOptions{Program: a.Prog, Interface: cfg.Ifindex, Flags: flags}); err != nil {
		return nil, fmt.Errorf("attaching XDP: %w", err)
	}
	info, err := a.Prog.Info()
	if err != nil {
		return nil, fmt.Errorf("reading program info: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return nil, errors.New("the kernel does not report BPF program ids")
	}
	a.progID = id
	return a, nil
}

// ProgID is the attached program's id.
func (a *Attached) ProgID() ebpf.ProgramID { return a.progID }

// Check reports a program that no longer runs on its device: the kernel
// refuses anyone else's attach while the bpf_link holds the device, but
// the link itself can be detached (`bpftool link detach`, or the device
// deleted).
func (a *Attached) Check() error {
	info, err := a.link.Info()
	if err != nil {
		return fmt.Errorf("reading the rxq bpf_link: %w", err)
	}
	if x := info.XDP(); x == nil || x.Ifindex == 0 {
		return fmt.Errorf("the rxq program is no longer attached: its bpf_link was detached (device deleted, or `bpftool link detach`); its counters have stopped")
	}
	return nil
}

// Close detaches the program and frees it and its maps.
func (a *Attached) Close() error {
	var errs []error
	if a.link != nil {
		errs = append(errs, a.link.Close())
	}
	if a.Program != nil {
		errs = append(errs, a.Program.Close())
	}
	return errors.Join(errs...)
}

// DetachAll removes whatever XDP program a device has, and checks that
// none is left: a program owned by a bpf_link (which netlink cannot
// replace) is detached through its link; one attached through netlink
// (ip link set xdp) is removed through netlink in each mode.
func DetachAll(ifindex uint32) error {
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil || info.Type != link.XDPType {
			continue
		}
		if x := info.XDP(); x != nil && x.Ifindex == ifindex {
			if err := it.Link.Detach(); err != nil {
				return fmt.Errorf("detaching bpf_link %d: %w", it.ID, err)
			}
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if err := rtnl.DetachXDP(ifindex); err != nil {
		return err
	}
	links, err := rtnl.Dump()
	if err != nil && !errors.Is(err, rtnl.ErrDumpInterrupted) {
		return err
	}
	for _, l := range links {
		if l.Index == ifindex && len(l.XDP) > 0 {
			return fmt.Errorf("XDP program id %d is still attached after detaching", l.XDP[0].ProgID)
		}
	}
	return nil
}
