package collector

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/bpf/tracing"
)

// sendAttached sends one gauge per tracepoint tried: 1 attached, 0 not.
func sendAttached(ch chan<- prometheus.Metric, fams familyFilter, f *Family, set *tracing.Set) {
	for tp, ok := range set.Attached {
		fams.send(ch, f, boolValue(ok), tp)
	}
}

// missingTracepoints names the tracepoints that did not attach: not
// supported for those the kernel lacks, a failure for those it refused;
// nil when all attached.
func missingTracepoints(set *tracing.Set) error {
	var errs []error
	if len(set.Absent) > 0 {
		errs = append(errs, fmt.Errorf("%w: the kernel has no tracepoint %s", errors.ErrUnsupported, strings.Join(set.Absent, ", ")))
	}
	if len(set.Failed) > 0 {
		errs = append(errs, fmt.Errorf("tracepoints not attached: %s", strings.Join(set.Failed, ", ")))
	}
	return errors.Join(errs...)
}

// deviceFate is the fate of a device the BPF programs recorded: gone when
// it is of the exporter's namespace (ownNetns) and the scrape's links
// lack it, unknown in another namespace.
func deviceFate(links *Links, ownNetns uint64, d reap.Device) reap.Fate {
	if uint64(d.Netns) != ownNetns {
		return reap.Unknown
	}
	if _, ok := links.Get(d.Ifindex); ok || links.partial {
		return reap.Live
	}
	return reap.Gone
}
