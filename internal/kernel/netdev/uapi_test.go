package netdev

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// uapiNetdevHeader is the kernel's include/uapi/linux/netdev.h, generated
// from Documentation/netlink/specs/netdev.yaml, as libbpf carries it
// (libbpf commit f7081a6baf3f, 2026-07-30): the reference the decoder's
// constants are checked against, written by other people than the decoder.
var uapiNetdevHeader = filepath.Join("testdata", "uapi-netdev.h")

// uapiEnums reads every enumerator of a C header: an explicit integer
// value, or the previous one plus 1 (C's rule); expressions (the _MAX
// entries) are skipped.
func uapiEnums(t *testing.T, path string) map[string]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entry := regexp.MustCompile(`^\s*([A-Z][A-Z0-9_]*)\s*(?:=\s*([^,]+))?,?\s*$`)
	out := map[string]int64{}
	in, next := false, int64(0)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "enum"):
			in, next = true, 0
			continue
		case strings.HasPrefix(line, "};"):
			in = false
			continue
		}
		m := entry.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		v := next
		if m[2] != "" {
			if v, err = strconv.ParseInt(strings.TrimSpace(m[2]), 0, 64); err != nil {
				continue
			}
		}
		out[m[1]] = v
		next = v + 1
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNetdevConstantsMatchUAPI checks every command, attribute and flag the
// netdev decoder uses against the kernel's uapi header, so a fixture built
// with a wrong constant cannot agree with a decoder built with the same one.
func TestNetdevConstantsMatchUAPI(t *testing.T) {
	h := uapiEnums(t, uapiNetdevHeader)
	check := func(name string, got int64) {
		t.Helper()
		want, ok := h[name]
		switch {
		case !ok:
			t.Errorf("%s is not in %s", name, uapiNetdevHeader)
		case got != want:
			t.Errorf("%s: the decoder uses %d, the kernel %d", name, got, want)
		}
	}
	for name, v := range map[string]int64{
		"NETDEV_CMD_DEV_GET": CmdDevGet, "NETDEV_CMD_PAGE_POOL_GET": CmdPagePoolGet,
		"NETDEV_CMD_PAGE_POOL_STATS_GET": CmdPagePoolStatsGet, "NETDEV_CMD_QUEUE_GET": CmdQueueGet,
		"NETDEV_CMD_NAPI_GET": CmdNapiGet, "NETDEV_CMD_QSTATS_GET": CmdQstatsGet,

		"NETDEV_A_DEV_IFINDEX": ADevIfindex, "NETDEV_A_DEV_XDP_FEATURES": ADevXDPFeatures,
		"NETDEV_A_DEV_XDP_ZC_MAX_SEGS": ADevXDPZCMaxSegs, "NETDEV_A_DEV_XDP_RX_METADATA_FEATURES": ADevXDPRxMetadataFeatures,
		"NETDEV_A_DEV_XSK_FEATURES": ADevXSKFeatures,

		"NETDEV_A_PAGE_POOL_ID": APagePoolID, "NETDEV_A_PAGE_POOL_IFINDEX": APagePoolIfindex,
		"NETDEV_A_PAGE_POOL_NAPI_ID": APagePoolNapiID, "NETDEV_A_PAGE_POOL_INFLIGHT": APagePoolInflight,
		"NETDEV_A_PAGE_POOL_INFLIGHT_MEM": APagePoolInflightMem, "NETDEV_A_PAGE_POOL_DETACH_TIME": APagePoolDetachTime,

		"NETDEV_A_PAGE_POOL_STATS_INFO": APagePoolStatsInfo, "NETDEV_A_PAGE_POOL_STATS_ALLOC_FAST": APagePoolStatsAllocFast,
		"NETDEV_A_PAGE_POOL_STATS_RECYCLE_RELEASED_REFCNT": APagePoolStatsRecycleReleasedRefcnt,

		"NETDEV_A_NAPI_IFINDEX": ANapiIfindex, "NETDEV_A_NAPI_ID": ANapiID, "NETDEV_A_NAPI_IRQ": ANapiIRQ,
		"NETDEV_A_NAPI_PID": ANapiPID, "NETDEV_A_NAPI_DEFER_HARD_IRQS": ANapiDeferHardIRQs,
		"NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT": ANapiGROFlushTimeout,

		"NETDEV_A_QUEUE_ID": AQueueID, "NETDEV_A_QUEUE_IFINDEX": AQueueIfindex,
		"NETDEV_A_QUEUE_TYPE": AQueueType, "NETDEV_A_QUEUE_NAPI_ID": AQueueNapiID,

		"NETDEV_A_QSTATS_IFINDEX": AQstatsIfindex, "NETDEV_A_QSTATS_QUEUE_TYPE": AQstatsQueueType,
		"NETDEV_A_QSTATS_QUEUE_ID": AQstatsQueueID, "NETDEV_A_QSTATS_SCOPE": AQstatsScope,
		"NETDEV_QSTATS_SCOPE_QUEUE": QstatsScopeQueue, "NETDEV_A_QSTATS_RX_PACKETS": AQstatsFirstStat,
	} {
		check(name, v)
	}
	upper := func(prefix, name string) string {
		return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	}
	for i, n := range QstatNames {
		check(upper("NETDEV_A_QSTATS_", n), AQstatsFirstStat+int64(i))
	}
	for i, n := range PagePoolStatNames {
		check(upper("NETDEV_A_PAGE_POOL_STATS_", n), APagePoolStatsAllocFast+int64(i))
	}
	for i, n := range QueueTypes {
		check(upper("NETDEV_QUEUE_TYPE_", n), int64(i))
	}
	for prefix, names := range map[string][]string{
		"NETDEV_XDP_ACT_": XDPActNames, "NETDEV_XDP_RX_METADATA_": XDPRxMetadataNames, "NETDEV_XSK_FLAGS_": XSKFlagNames,
	} {
		for i, n := range names {
			check(upper(prefix, n), 1<<i)
		}
	}
	// Stats the kernel added after the decoder was written are ignored
	// by it (and named here, to be added).
	for name, v := range h {
		if strings.HasPrefix(name, "NETDEV_A_QSTATS_") && v >= AQstatsFirstStat && int(v-AQstatsFirstStat) >= len(QstatNames) {
			t.Logf("qstat %s (%d) is not decoded", name, v)
		}
	}
}
