package lab

import (
	"fmt"
	"io"

	"github.com/coreos/go-iptables/iptables"
)

// rawDropRule is the Linux baseline of the seed (`iptables -t raw -I
// PREROUTING -p udp --dport 9:19 -j DROP`), limited to the DUT and tagged so
// Down can find it after a crash.
var rawDropRule = []string{"-i", DUT, "-p", "udp", "--dport", "9", "-m", "comment", "--comment", "xdp-lab", "-j", "DROP"}

func addRawDrop() (io.Closer, error) {
	ipt, err := iptables.New()
	if err != nil {
		return nil, fmt.Errorf("iptables: %w", err)
	}
	if err := ipt.AppendUnique("raw", "PREROUTING", rawDropRule...); err != nil {
		return nil, fmt.Errorf("adding the raw-table DROP rule: %w", err)
	}
	return closerFunc(removeRawDrop), nil
}

func removeRawDrop() error {
	ipt, err := iptables.New()
	if err != nil {
		return fmt.Errorf("iptables: %w", err)
	}
	if err := ipt.DeleteIfExists("raw", "PREROUTING", rawDropRule...); err != nil {
		return fmt.Errorf("removing the raw-table DROP rule: %w", err)
	}
	return nil
}
