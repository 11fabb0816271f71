package collector

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolname"
)

// ethtoolFixtureFiles are the captured dumps under testdata/ethtool and
// the configuration views under testdata/ethtool/config.
func ethtoolFixtureFiles(f *testing.F) []string {
	paths, err := filepath.Glob(filepath.Join("testdata", "ethtool", "*.txt"))
	config, cerr := filepath.Glob(filepath.Join("testdata", "ethtool", "config", "*.txt"))
	if err != nil || cerr != nil || len(paths) == 0 || len(config) == 0 {
		f.Fatalf("no ethtool fixtures: %v %v", err, cerr)
	}
	return append(paths, config...)
}

var (
	// statFragment is what ethtoolname.Sanitize promises: runs of [a-z0-9] joined
	// by single underscores, nothing at either end.
	statFragment = regexp.MustCompile(`^(?:[a-z0-9]+(?:_[a-z0-9]+)*)?$`)
	// queueNumber is a decimal queue number as ethtoolname.ParseQueue returns it.
	queueNumber = regexp.MustCompile(`^(?:0|[1-9][0-9]*)$`)
	phySize     = regexp.MustCompile(`^(?:0|[1-9][0-9]*)(?:_to_(?:0|[1-9][0-9]*))?$`)
	alnum       = regexp.MustCompile(`[A-Za-z0-9]`)
)

// queueSpellings are the names ethtoolname.ParseQueue maps to (base, queue): the
// driver schemes documented on ethtoolname.ParseQueue.
func queueSpellings(base, queue string) []string {
	out := []string{"[" + queue + "]: " + base, "queue_" + queue + "_" + base, base + "[" + queue + "]"}
	for _, dir := range []string{"rx", "tx", "ch"} {
		if b, ok := strings.CutPrefix(base, dir+"_"); ok {
			out = append(out, dir+queue+"_"+b)
			if dir != "ch" {
				out = append(out, dir+"-"+queue+"."+b, dir+"_queue_"+queue+"_"+b)
			}
		}
	}
	return out
}

// FuzzEthtoolStatName checks the ethtool -S stat-name grammar on arbitrary
// ETH_SS_STATS strings: ethtoolname.ParseQueue, Sanitize and PhyRxSize.
func FuzzEthtoolStatName(f *testing.F) {
	// One captured name per shape (digit runs aside): the other queues'
	// copies add no coverage, only baseline time out of CI's 60 s.
	digits := regexp.MustCompile(`[0-9]+`)
	shapes := map[string]bool{}
	for _, path := range ethtoolFixtureFiles(f) {
		for _, n := range loadFixture(f, path).names {
			if shape := digits.ReplaceAllString(n, "N"); !shapes[shape] {
				shapes[shape] = true
				f.Add(n)
			}
		}
	}
	for _, n := range []string{"", "rx-01.packets", "[0]: ", "rx_queue_0_", "ch0_", "queue_7_rx_cnt",
		"rx_65_to_127_bytes_phy", "rx_0_bytes_phy", "Rx\xffQueue\u00e9 0", "__a__B__"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		base, queue, ok := ethtoolname.ParseQueue(name)
		if ok {
			if !queueNumber.MatchString(queue) {
				t.Fatalf("parseQueue(%q): queue %q is not a decimal number", name, queue)
			}
			if base == "" {
				t.Fatalf("parseQueue(%q): empty base", name)
			}
			// Nothing is lost or invented: the name is one of the
			// driver spellings of (base, queue).
			if !slices.Contains(queueSpellings(base, queue), name) {
				t.Fatalf("parseQueue(%q) = (%q, %q), which no driver scheme spells that way", name, base, queue)
			}
		} else if base != "" || queue != "" {
			t.Fatalf("parseQueue(%q) failed but returned (%q, %q)", name, base, queue)
		}

		s := ethtoolname.Sanitize(name)
		if !statFragment.MatchString(s) {
			t.Fatalf("sanitizeStat(%q) = %q, not a metric-name fragment", name, s)
		}
		for _, prefix := range []string{"xdp_nic_stat_", "xdp_nic_queue_stat_"} {
			if s != "" && !model.IsValidLegacyMetricName(prefix+s) {
				t.Fatalf("sanitizeStat(%q) = %q: %s%s is not a valid metric name", name, s, prefix, s)
			}
		}
		if again := ethtoolname.Sanitize(s); again != s {
			t.Fatalf("sanitizeStat not idempotent: %q -> %q -> %q", name, s, again)
		}
		if (s == "") == alnum.MatchString(name) {
			t.Fatalf("sanitizeStat(%q) = %q: empty exactly when the name has no ASCII letter or digit", name, s)
		}

		if size, ok := ethtoolname.PhyRxSize(name); ok {
			if !phySize.MatchString(size) || name != "rx_"+size+"_bytes_phy" {
				t.Fatalf("phyRxSize(%q) = %q", name, size)
			}
		}
	})
}

// ethtoolDumpSeeds are the captured dumps without comments and with one
// stat per name shape (digit runs aside) over all of them: the fuzzer
// minimises every input that finds new coverage, which takes time growing
// with the square of its size, so full 20 KB dumps would spend CI's 60 s
// minimising instead of fuzzing.
func ethtoolDumpSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	digits := regexp.MustCompile(`[0-9]+`)
	shapes := map[string]bool{}
	for _, path := range ethtoolFixtureFiles(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		var seed []string
		inStats := false
		for _, line := range strings.Split(string(b), "\n") {
			trimmed := strings.TrimSpace(line)
			switch {
			case trimmed == "" || strings.HasPrefix(trimmed, "#"):
				continue
			case trimmed == "NIC statistics:":
				inStats = true
			case inStats && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t"):
				inStats = false
			case inStats:
				// As parseFixture: names may contain ": " (bnxt), values not.
				shape := digits.ReplaceAllString(trimmed[:max(strings.LastIndex(trimmed, ":"), 0)], "N")
				if shapes[shape] {
					continue
				}
				shapes[shape] = true
			}
			seed = append(seed, line)
		}
		dump := []byte(strings.Join(seed, "\n") + "\n")
		if _, err := parseFixture(bytes.NewReader(dump)); err != nil {
			f.Fatalf("%s: trimmed seed: %v", path, err)
		}
		seeds = append(seeds, dump)
	}
	return seeds
}

// FuzzEthtoolDump runs the ethtool collector on a mutated `ethtool -i -S -g
// -l --show-priv-flags` dump, or a configuration capture (`ethtool DEV`,
// `-c`, `-I -a`, `-x`, `-n DEV rx-flow-hash FLOW`), served through the
// fixture source: whatever
// the driver reports, a scrape must succeed, a pedantic registry must
// accept it, the second scrape (from the cached plan) must equal the first,
// and the stats must yield at most one series each.
func FuzzEthtoolDump(f *testing.F) {
	for _, seed := range ethtoolDumpSeeds(f) {
		f.Add(seed)
	}
	// Families fed by the other ioctls, not by stats.
	notStats := map[string]bool{}
	for _, fam := range []*Family{ethtoolDriverInfoFam, ethtoolChannels, ethtoolChannelsMax, ethtoolRing, ethtoolRingMax, ethtoolPrivFlag,
		ethtoolLinkSpeed, ethtoolLinkInfo, ethtoolCoalesceDelay, ethtoolCoalesceFrames, ethtoolCoalesceAdaptive, ethtoolPauseEnabled, ethtoolPauseAutoneg,
		ethtoolRSSEntries, ethtoolRSSInfo, ethtoolRSSFields, ethtoolNtupleRules, nicPauseFrames, nicFECBlocks, ethtoolFECInfo, nicSignalSource} {
		notStats[fam.Name] = true
	}
	f.Fuzz(func(t *testing.T, dump []byte) {
		d, err := parseFixture(bytes.NewReader(dump))
		if err != nil {
			return
		}
		c := newEthtoolCollector(EthtoolConfig{}, newFixtureSource(map[string]*fixtureDev{"eth0": d}), slog.New(slog.DiscardHandler))
		var scrapes []string
		for range 2 {
			ms, err := collect(c)
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			mfs, err := pedanticGather(ms)
			if err != nil {
				t.Fatalf("pedantic registry: %v", err)
			}
			series := 0
			for _, mf := range mfs {
				if !notStats[mf.GetName()] {
					series += len(mf.GetMetric())
				}
				for _, m := range mf.GetMetric() {
					for _, lp := range m.GetLabel() {
						if lp.GetName() == "queue" && lp.GetValue() != "" && !queueNumber.MatchString(lp.GetValue()) {
							t.Fatalf("%s: queue label %q", mf.GetName(), lp.GetValue())
						}
					}
				}
			}
			if series > len(d.names) {
				t.Fatalf("%d stat series from %d stats", series, len(d.names))
			}
			scrapes = append(scrapes, exposition(t, mfs))
		}
		if scrapes[0] != scrapes[1] {
			t.Fatalf("second scrape differs from the first:\n%s\n---\n%s", scrapes[0], scrapes[1])
		}
	})
}
