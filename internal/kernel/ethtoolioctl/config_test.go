package ethtoolioctl

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestConfigVeth reads a veth's configuration: its link is what
// veth_get_link_ksettings (drivers/net/veth.c) says, 10000 Mb/s full
// duplex without auto-negotiation, and the driver has none of the
// coalescing, pause or RSS calls, which the kernel answers EOPNOTSUPP
// (net/ethtool/ioctl.c checks the ethtool_ops member first). The calls on
// drivers that have them run in the kernel matrix's emulated-NIC guest
// (kernelmatrix.TestEmulatedNICs: e1000e and vmxnet3).
func TestConfigVeth(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	k, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	dev := pair.Host.Name

	l, err := k.LinkSettings(dev)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Link{SpeedMbps: 10000, Duplex: 1}); l != want {
		t.Errorf("veth link %+v, want %+v", l, want)
	}
	for call, err := range map[string]error{
		"ETHTOOL_GCOALESCE":   second(k.Coalesce(dev)),
		"ETHTOOL_GPAUSEPARAM": second(k.PauseParam(dev)),
		"ETHTOOL_GRSSH":       second(k.RSS(dev)),
		"ETHTOOL_GRXFH":       second(k.HashFields(dev, FlowTCP4)),
		"ETHTOOL_GRXCLSRLCNT": second(k.NtupleRules(dev)),
	} {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("%s on veth: %v, want EOPNOTSUPP", call, err)
		}
	}
	if _, err := k.LinkSettings("xdpexp-none0"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("ETHTOOL_GSET on a missing device: %v, want ENODEV", err)
	}
}

func second[T any](_ T, err error) error { return err }
