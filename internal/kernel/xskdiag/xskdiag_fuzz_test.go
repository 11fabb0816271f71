package xskdiag

import (
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nltest"
)

// FuzzDecode feeds sock_diag replies (struct nlmsghdr, struct
// xdp_diag_msg, attributes) to Decode: no panic, one socket per message
// when decoding succeeds, and no more ring sizes than a socket has rings.
// The collector's FuzzXDPDiag runs the same replies on through the
// metrics.
func FuzzDecode(f *testing.F) {
	b, err := nltest.ReadHex("testdata/xdp-diag.hex")
	if err != nil {
		f.Fatal(err)
	}
	seeds, err := nltest.Seeds(b)
	nltest.AddSeeds(f, seeds, err)
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs, ok := nltest.Split(raw)
		if !ok {
			return
		}
		socks, err := Decode(msgs)
		if err != nil {
			return
		}
		if len(socks) != len(msgs) {
			t.Fatalf("%d sockets from %d messages", len(socks), len(msgs))
		}
		for _, s := range socks {
			if len(s.Rings) > 4 {
				t.Fatalf("socket %d has %d rings: %v", s.Inode, len(s.Rings), s.Rings)
			}
		}
	})
}
