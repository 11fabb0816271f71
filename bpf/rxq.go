package bpf

import "fmt"

// RxqConfig is the load-time configuration of the rxq program. The values
// become read-only globals, so the verifier prunes the paths not taken.
type RxqConfig struct {
	// Ifindex is the device the program is attached to; packets whose
	// ctx->ingress_ifindex differs are counted as issues, as xdp_rxq_info does.
	Ifindex int
	// Action is the verdict: XDPPass, XDPDrop, XDPTx (with a MAC swap) or
	// XDPRedirect (into the devmap RxqRedirect, slot 0).
	Action XDPAction
	// Read reads the Ethernet header before the verdict.
	Read bool
	// Queues sizes the per-queue map; a packet from a higher
	// ctx->rx_queue_index is counted as an issue. 256 when zero.
	Queues int
}

// XDPAction is an XDP verdict (enum xdp_action).
type XDPAction uint32

// The verdicts the rxq program can return.
const (
	XDPAborted  XDPAction = 0
	XDPDrop     XDPAction = 1
	XDPPass     XDPAction = 2
	XDPTx       XDPAction = 3
	XDPRedirect XDPAction = 4
)

// Keys of the rxq_issues map (enum rxq_issue in rxq.c).
const (
	RxqIssueIfindex uint32 = 0
	RxqIssueQueue   uint32 = 1
)

// LoadRxqConfigured loads the rxq program with cfg applied. The caller
// closes the objects; for XDPRedirect it also fills RxqRedirect slot 0.
func LoadRxqConfigured(cfg RxqConfig) (*RxqObjects, error) {
	switch cfg.Action {
	case XDPPass, XDPDrop, XDPTx, XDPRedirect:
	default:
		return nil, fmt.Errorf("rxq: unsupported XDP action %d", cfg.Action)
	}
	spec, err := LoadRxq()
	if err != nil {
		return nil, err
	}
	if cfg.Queues > 0 {
		spec.Maps["rxq_stats"].MaxEntries = uint32(cfg.Queues)
	}
	for name, v := range map[string]any{
		"cfg_ifindex": uint32(cfg.Ifindex),
		"cfg_action":  uint32(cfg.Action),
		"cfg_read":    cfg.Read,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("rxq: setting %s: %w", name, err)
		}
	}
	objs := &RxqObjects{}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return nil, fmt.Errorf("loading the rxq XDP program: %w", err)
	}
	return objs, nil
}
