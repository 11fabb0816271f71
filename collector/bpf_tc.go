package collector

import (
	"errors"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/tcprog"
)

var bpfTCProgInfo = newFamily("bpf", "bpf_tc_prog_info",
	"A BPF program on a tc, tcx or netkit hook of a device, from RTM_GETTFILTER and BPF_PROG_QUERY; always 1.",
	Gauge, "device", "kind", "hook", "order", "prog_id", "name", "tag", "link_id").documented("A BPF program on a traffic-control hook of a device: kind tc (a cls_bpf filter under clsact or ingress, RTM_GETTFILTER), " +
	"tcx (Linux 6.6) or netkit (6.7, BPF_PROG_QUERY); hook ingress or egress, for netkit primary or peer; " +
	"order its place in the hook's run order from 0; link_id of the bpf_link holding it (absent without one). " +
	"Run count and run time are in xdp_bpf_prog_runs_total and xdp_bpf_prog_run_seconds_total by prog_id. Always 1.")

// tcKinds says which hooks beyond tc the kernel has, as probed when the
// collector is built.
type tcKinds struct{ tcx, netkit bool }

// probeTCKinds asks the kernel for tcx and netkit. A kernel without one
// is said once at INFO and not asked again; a probe that fails otherwise
// leaves the kind on, so that every scrape reports the failure.
func probeTCKinds(logger *slog.Logger) tcKinds {
	var k tcKinds
	for _, p := range []struct {
		kind  string
		probe func() error
		on    *bool
	}{{tcprog.KindTCX, tcprog.ProbeTCX, &k.tcx}, {tcprog.KindNetkit, tcprog.ProbeNetkit, &k.netkit}} {
		err := p.probe()
		*p.on = !errors.Is(err, errors.ErrUnsupported)
		if !*p.on {
			logger.Info("BPF hook not supported by this kernel; its programs are not listed",
				"hook", p.kind, "hint", tcprog.RunningHint(p.kind), "err", err)
		}
	}
	return k
}

// tcAttachments lists the programs on the traffic-control hooks of devs:
// one qdisc dump for the namespace, then the filters of each device with
// clsact or ingress, the tcx hooks of every device and the netkit hooks
// of each netkit device. A device that fails is reported and the others
// are listed.
func (c *bpfCollector) tcAttachments(devs []Link) ([]tcprog.Attachment, error) {
	var out []tcprog.Attachment
	var errs []error
	dumper, err := tcprog.NewDumper()
	if err != nil {
		return nil, err
	}
	defer dumper.Close()
	hooks, err := dumper.QdiscHooks()
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range devs {
		for _, dir := range hooks[d.Index] {
			got, err := dumper.TC(d.Index, dir)
			out, errs = append(out, got...), append(errs, err)
		}
		if c.kinds.tcx {
			got, err := tcprog.TCX(d.Index)
			out, errs = append(out, got...), append(errs, err)
		}
		if c.kinds.netkit && d.Kind == tcprog.KindNetkit {
			got, err := tcprog.Netkit(d.Index)
			out, errs = append(out, got...), append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, bpfDenied("bpf", needsNetAdmin, err)
	}
	return out, nil
}

func (c *bpfCollector) sendTC(ch chan<- prometheus.Metric, devs *Links, a tcprog.Attachment, name, tag string) {
	linkID := ""
	if a.Link != 0 {
		linkID = strconv.FormatUint(uint64(a.Link), 10)
	}
	c.cfg.Families.send(ch, bpfTCProgInfo, 1, devs.Label(a.Ifindex), a.Kind, a.Direction, strconv.Itoa(a.Order), progIDLabel(a.Prog), name, tag, linkID)
}
