package netdev

import (
	"path/filepath"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nltest"
)

// FuzzDecode feeds netlink replies of the netdev family (struct nlmsghdr,
// struct genlmsghdr, attributes, as the kernel sends them) to every
// decoder: whatever the attributes hold, nothing panics, and a decoder
// that succeeds returns one value per message. The collector's
// FuzzNetdevDecode runs the same replies on through the metrics.
func FuzzDecode(f *testing.F) {
	seeds, err := nltest.ReadDir(filepath.Join("testdata", "replies"))
	nltest.AddSeeds(f, seeds, err)
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs, ok := nltest.Genl(raw)
		if !ok {
			return
		}
		check := func(what string, n int, err error) {
			if err == nil && n != len(msgs) {
				t.Fatalf("%s: %d values from %d messages", what, n, len(msgs))
			}
		}
		devs, err := DecodeDevs(msgs)
		check("dev-get", len(devs), err)
		qs, err := DecodeQstats(msgs)
		check("qstats-get", len(qs), err)
		queues, err := DecodeQueues(msgs)
		check("queue-get", len(queues), err)
		napis, err := DecodeNapis(msgs)
		check("napi-get", len(napis), err)
		pools, err := DecodePagePools(msgs)
		check("page-pool-get", len(pools), err)
		stats, err := DecodePagePoolStats(msgs)
		check("page-pool-stats-get", len(stats), err)
	})
}
