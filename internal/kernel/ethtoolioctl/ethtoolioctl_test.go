package ethtoolioctl

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestGuardPage checks the guard page with a write the kernel makes
// past the buffer: ETHTOOL_GDRVINFO fills a struct ethtool_drvinfo of 196
// bytes, here into the last 8 bytes before the guard, and must fault
// (EFAULT) instead of landing in our memory. Then it asks for fewer
// strings and stats than a veth has: older kernels write them all
// anyway, which the guard stops with EFAULT; this one checks the count
// itself and answers 0. Either way the call reports the change.
func TestGuardPage(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	k, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	b, mem, err := k.bufs.get(8)
	if err != nil {
		t.Fatal(err)
	}
	binary.NativeEndian.PutUint32(mem, unix.ETHTOOL_GDRVINFO)
	if err := k.ioctl(pair.Host.Name, unsafe.Pointer(&mem[0])); !errors.Is(err, unix.EFAULT) {
		t.Errorf("GDRVINFO into 8 bytes before the guard page: %v, want EFAULT", err)
	}
	k.bufs.put(b)

	info, err := k.DriverInfo(pair.Host.Name)
	if err != nil {
		t.Fatal(err)
	}
	changed := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, ErrStatsChanged) || !errors.Is(err, unix.EFAULT) && !strings.Contains(err.Error(), ": 0 ") {
			t.Errorf("%s with a short buffer: %v, want ErrStatsChanged from EFAULT or a count of 0", call, err)
		}
	}
	_, err = k.StatNames(pair.Host.Name, info.NStats-1)
	changed("GSTRINGS", err)
	_, err = k.Stats(pair.Host.Name, info.NStats-1, nil)
	changed("GSTATS", err)
	names, err := k.StatNames(pair.Host.Name, info.NStats)
	if err != nil || len(names) != info.NStats || names[0] != "peer_ifindex" {
		t.Fatalf("StatNames = %q, %v", names, err)
	}
	vals, err := k.Stats(pair.Host.Name, info.NStats, nil)
	if err != nil || vals[0] == 0 {
		t.Fatalf("Stats = %v, %v; want peer_ifindex first", vals, err)
	}
}
