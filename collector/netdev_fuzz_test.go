package collector

import (
	"log/slog"
	"testing"

	"github.com/mdlayher/genetlink"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nltest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xskdiag"
)

// FuzzNetdevDecode feeds netlink replies of the netdev family (struct
// nlmsghdr, struct genlmsghdr, attributes, as the kernel sends them)
// through the reader's decoders to the collector: whatever the attributes
// hold, nothing panics and every metric it sends can be written out. The
// reader's own FuzzDecode holds the decoders to one value per message;
// both start from the reader's recorded replies.
func FuzzNetdevDecode(f *testing.F) {
	seeds, err := nltest.ReadDir("../internal/kernel/netdev/testdata/replies")
	nltest.AddSeeds(f, seeds, err)
	procFS := f.TempDir()
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs, ok := nltest.Genl(raw)
		if !ok {
			return
		}
		of := func(cmd uint8) []genetlink.Message {
			var out []genetlink.Message
			for _, m := range msgs {
				if m.Header.Command == cmd {
					out = append(out, m)
				}
			}
			return out
		}
		v := &netdevValues{}
		v.devs, _ = netdev.DecodeDevs(of(netdev.CmdDevGet))
		v.qstats, _ = netdev.DecodeQstats(of(netdev.CmdQstatsGet))
		v.queues, _ = netdev.DecodeQueues(of(netdev.CmdQueueGet))
		v.napis, _ = netdev.DecodeNapis(of(netdev.CmdNapiGet))
		v.pools, _ = netdev.DecodePagePools(of(netdev.CmdPagePoolGet))
		v.poolStats, _ = netdev.DecodePagePoolStats(of(netdev.CmdPagePoolStatsGet))
		c := onLinks{newNetdevCollector(NetdevConfig{PerQueueStats: true, ProcFS: procFS}, slog.New(slog.DiscardHandler), v), eth0Links()}
		ms, _ := collect(c)
		writeAll(t, ms)
	})
}

// FuzzXDPDiag feeds sock_diag replies (struct nlmsghdr, struct
// xdp_diag_msg, attributes) to xskdiag.Decode and the xsk collector: no
// panic, one socket per message when decoding succeeds, and the collector
// sends every stat of every socket that has XDP_DIAG_STATS.
func FuzzXDPDiag(f *testing.F) {
	seeds, err := nltest.Seeds(hexFixture(f, "../internal/kernel/xskdiag/testdata/xdp-diag.hex"))
	nltest.AddSeeds(f, seeds, err)
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs, ok := nltest.Split(raw)
		if !ok {
			return
		}
		socks, err := xskdiag.Decode(msgs)
		if err != nil {
			return
		}
		if len(socks) != len(msgs) {
			t.Fatalf("%d sockets from %d messages", len(socks), len(msgs))
		}
		withStats, want := 0, 0
		for _, s := range socks {
			if s.HasStats {
				withStats++
				want += len(xskStatNames) + len(s.Rings)
			}
		}
		c := onLinks{&xskCollector{logger: slog.New(slog.DiscardHandler), src: xskSockets(socks)}, eth0Links()}
		ms, err := collect(c)
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		writeAll(t, ms)
		if len(ms) != want {
			t.Fatalf("%d metrics for %d sockets with stats, want %d (their counters and rings)", len(ms), withStats, want)
		}
	})
}
