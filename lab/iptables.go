package lab

import (
	"fmt"
	"io"

	"github.com/coreos/go-iptables/iptables"
)

// rawDropRule is the Linux baseline of the benchmark notes (`iptables -t raw -I
// PREROUTING -p udp --dport 9:19 -j DROP`), limited to the DUT and tagged
// with the lab's namespace so Down can find it after a crash.
func (lb Lab) rawDropRule() []string {
	return []string{"-i", lb.DUT, "-p", "udp", "--dport", "9", "-m", "comment", "--comment", lb.Namespace, "-j", "DROP"}
}

func (lb Lab) addRawDrop() (io.Closer, error) {
	ipt, err := iptables.New()
	if err != nil {
		return nil, fmt.Errorf("iptables: %w", err)
	}
	if err := ipt.AppendUnique("raw", "PREROUTING", lb.rawDropRule()...); err != nil {
		return nil, fmt.Errorf("adding the raw-table DROP rule: %w", err)
	}
	return closerFunc(lb.removeRawDrop), nil
}

func (lb Lab) removeRawDrop() error {
	ipt, err := iptables.New()
	if err != nil {
		return fmt.Errorf("iptables: %w", err)
	}
	if err := ipt.DeleteIfExists("raw", "PREROUTING", lb.rawDropRule()...); err != nil {
		return fmt.Errorf("removing the raw-table DROP rule: %w", err)
	}
	return nil
}
