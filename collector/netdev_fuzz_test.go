package collector

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/mdlayher/genetlink"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xskdiag"
	"github.com/xdp-exporter/xdp_exporter/internal/nltest"
)

// fuzzNetdevSource answers each dump with the fuzz input's messages of that
// command, as the kernel tags its replies; the queue-scope qstats request
// gets none (the per-queue replies arrive with the device-scope ones).
type fuzzNetdevSource struct{ msgs []genetlink.Message }

func (s fuzzNetdevSource) Dump(cmd uint8, attrs []byte) ([]genetlink.Message, error) {
	if attrs != nil {
		return nil, nil
	}
	var out []genetlink.Message
	for _, m := range s.msgs {
		if m.Header.Command == cmd {
			out = append(out, m)
		}
	}
	return out, nil
}

func (fuzzNetdevSource) Close() error { return nil }

// FuzzNetdevDecode feeds netlink replies of the netdev family (struct
// nlmsghdr, struct genlmsghdr, attributes, as the kernel sends them) to
// every netdev decoder and to the collector. Whatever the attributes hold,
// nothing panics, a decoder that succeeds returns one value per message,
// and every metric the collector sends can be written out.
func FuzzNetdevDecode(f *testing.F) {
	var all []byte
	for _, name := range []string{"dev-get", "qstats-get", "qstats-get-queue", "queue-get", "queue-get-irq",
		"napi-get", "napi-get-irq", "page-pool-get", "page-pool-stats-get"} {
		b := hexFixture(f, filepath.Join(netdevReplies, name+".hex"))
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	procFS := f.TempDir()
	f.Fuzz(func(t *testing.T, raw []byte) {
		nms, ok := nltest.Split(raw)
		if !ok {
			return
		}
		msgs := make([]genetlink.Message, 0, len(nms))
		for _, nm := range nms {
			var gm genetlink.Message
			if err := gm.UnmarshalBinary(nm.Data); err != nil {
				return
			}
			msgs = append(msgs, gm)
		}
		check := func(what string, n int, err error) {
			if err == nil && n != len(msgs) {
				t.Fatalf("%s: %d values from %d messages", what, n, len(msgs))
			}
		}
		devs, err := netdev.DecodeDevs(msgs)
		check("dev-get", len(devs), err)
		qs, err := netdev.DecodeQstats(msgs)
		check("qstats-get", len(qs), err)
		queues, err := netdev.DecodeQueues(msgs)
		check("queue-get", len(queues), err)
		napis, err := netdev.DecodeNapis(msgs)
		check("napi-get", len(napis), err)
		pools, err := netdev.DecodePagePools(msgs)
		check("page-pool-get", len(pools), err)
		stats, err := netdev.DecodePagePoolStats(msgs)
		check("page-pool-stats-get", len(stats), err)

		c := onLinks{newNetdevCollector(NetdevConfig{PerQueueStats: true, ProcFS: procFS}, slog.New(slog.DiscardHandler),
			fuzzNetdevSource{msgs}), fixtureLinks()}
		ms, _ := collect(c)
		writeAll(t, ms)
	})
}

// FuzzXDPDiag feeds sock_diag replies (struct nlmsghdr, struct
// xdp_diag_msg, attributes) to xskdiag.Decode and the xsk collector: no
// panic, one socket per message when decoding succeeds, and the collector
// sends every stat of every socket that has XDP_DIAG_STATS.
func FuzzXDPDiag(f *testing.F) {
	b := hexFixture(f, xskFixturePath)
	f.Add(b)
	msgs, _ := nltest.Split(b)
	for _, m := range msgs {
		raw, err := m.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
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
		c := onLinks{&xskCollector{logger: slog.New(slog.DiscardHandler), src: replayXSK{msgs}}, fixtureLinks()}
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
