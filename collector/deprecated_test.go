package collector

import (
	"slices"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// TestRenameDeprecatedFlags: the flags of the collectors 1.0 renamed parse
// under their old names, as the new flags, and are reported; other flags,
// and anything after "--", are untouched.
func TestRenameDeprecatedFlags(t *testing.T) {
	args := []string{
		"--collector.xdp.xmit", "--no-collector.ethtool", "--collector.ethtool.sum-queues=false",
		"--collector.xdp.device-include", "eth0", "--collector.xdpx", "--collector.rxq", "--", "--collector.xdp",
	}
	got, old := RenameDeprecatedFlags(args)
	want := []string{
		"--collector.monitor.xmit", "--no-collector.nic", "--collector.nic.sum-queues=false",
		"--collector.monitor.device-include", "eth0", "--collector.xdpx", "--collector.rxq", "--", "--collector.xdp",
	}
	if !slices.Equal(got, want) {
		t.Errorf("renamed\n%q\nwant\n%q", got, want)
	}
	if wantOld := []string{"--collector.xdp.xmit", "--no-collector.ethtool", "--collector.ethtool.sum-queues", "--collector.xdp.device-include"}; !slices.Equal(old, wantOld) {
		t.Errorf("reported %q, want %q", old, wantOld)
	}

	app := kingpin.New("test", "")
	sel := AddFlags(app)
	renamed, _ := RenameDeprecatedFlags([]string{"--no-collector.xdp", "--collector.ethtool.device-exclude=^veth"})
	if _, err := app.Parse(renamed); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(sel.Enabled(), "monitor") {
		t.Errorf("--no-collector.xdp left the monitor collector on: %v", sel.Enabled())
	}
	for old, to := range renamedCollectors {
		if _, ok := registrations[to]; !ok {
			t.Errorf("collector %s renamed to %s, which is not registered", old, to)
		}
		if _, ok := registrations[old]; ok {
			t.Errorf("collector %s is both registered and renamed", old)
		}
	}
}
