package collector

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/bpfperm"
)

const (
	needsBPF      = bpfperm.BPF
	needsAdmin    = bpfperm.Admin
	needsNetAdmin = bpfperm.NetAdmin
)

// bpfDenied explains a bpf(2) call the kernel refused with EPERM or
// EACCES by the causes that hold on this host (bpfperm.Causes). Other
// errors pass unchanged.
func bpfDenied(collector string, needs bpfperm.Needs, err error) error {
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return err
	}
	return fmt.Errorf("BPF not permitted for the %s collector: %s: %w", collector, strings.Join(bpfperm.Causes(needs), "; "), err)
}
