package xdptest

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The XDP verdicts (enum xdp_action, include/uapi/linux/bpf.h).
const (
	Aborted  uint32 = 0
	Drop     uint32 = 1
	Pass     uint32 = 2
	TX       uint32 = 3
	Redirect uint32 = 4
)

// Verdict loads an XDP program called name that returns verdict for every
// frame: the smallest program a user could attach, and the stand-in for
// one in the tests and the lab.
func Verdict(name string, verdict uint32) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.XDP,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, int32(verdict)), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("loading an XDP program returning %d: %w", verdict, err)
	}
	return prog, nil
}

// RedirectMap loads an XDP program called name that redirects every frame
// into slot 0 of m (a devmap, a cpumap) with bpf_redirect_map, XDP_ABORTED
// where the slot is empty.
func RedirectMap(name string, m *ebpf.Map) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    name,
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Imm(asm.R2, 0),
			asm.Mov.Imm(asm.R3, 0),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("loading an XDP program redirecting into %v: %w", m, err)
	}
	return prog, nil
}

// TCNext is the verdict with which a tc, tcx or netkit program hands the
// packet on to the next program or the hook's default: TC_ACT_UNSPEC,
// TCX_NEXT and NETKIT_NEXT are all -1 (include/uapi/linux/pkt_cls.h,
// bpf.h).
const TCNext = -1

// TC loads a sched_cls program called name that returns TCNext for every
// packet: a program of the traffic-control hooks that changes nothing.
func TC(name string) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, TCNext), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("loading a sched_cls program: %w", err)
	}
	return prog, nil
}
