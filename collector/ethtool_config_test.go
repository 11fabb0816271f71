package collector

import (
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolnl"
)

// TestEthtoolConfig sends an mlx5 port's configuration (hostNICConfig, the
// driver's defaults) as the configuration families, and nothing of it for
// a veth, whose driver refuses every call but the link's; the refused
// calls are not made again on the next scrape.
func TestEthtoolConfig(t *testing.T) {
	src := loadFixtures(t, "mlx5", "veth")
	src.devs["mlx5"].config = hostNICConfig()
	src.devs["veth"].config.link = &ethtoolioctl.Link{SpeedMbps: 10000, Duplex: 1}
	src.std.pause = []ethtoolnl.Pause{{Ifindex: uint32(src.index["mlx5"]), RX: true, TX: true, HasTXFrames: true, TXFrames: 3400}}
	src.std.fec = []ethtoolnl.FEC{{Ifindex: uint32(src.index["mlx5"]), Active: 50, HasActive: true, HasCorrected: true, Corrected: 1234},
		{Ifindex: uint32(src.index["veth"]), Active: 99, HasActive: true}}
	c := fixtureCollector(t, src, "", DefaultEthtoolMetricsExclude, nil)
	mfs := gather(t, c)

	for _, e := range []struct {
		fam    string
		labels []string
		want   float64
	}{
		{"xdp_nic_link_speed_bytes_per_second", nil, 100e9 / 8},
		{"xdp_nic_link_info", []string{"duplex", "full", "autoneg", "on"}, 1},
		{"xdp_nic_coalesce_delay_seconds", []string{"direction", "rx"}, 8e-6},
		{"xdp_nic_coalesce_delay_seconds", []string{"direction", "tx"}, 16e-6},
		{"xdp_nic_coalesce_max_frames", []string{"direction", "rx"}, 128},
		{"xdp_nic_coalesce_adaptive", []string{"direction", "rx"}, 1},
		{"xdp_nic_coalesce_adaptive", []string{"direction", "tx"}, 0},
		{"xdp_nic_pause_enabled", []string{"direction", "rx"}, 1},
		{"xdp_nic_pause_autoneg_enabled", nil, 0},
		{"xdp_nic_rss_info", []string{"hash_function", "toeplitz", "table_size", "256"}, 1},
		{"xdp_nic_rss_hash_fields_info", []string{"flow_type", "udp6", "fields", "sdfn"}, 1},
		{"xdp_nic_ntuple_rules", nil, 0},
		{"xdp_nic_pause_frames_total", []string{"direction", "tx"}, 3400},
		{"xdp_nic_fec_info", []string{"encoding", "rs"}, 1},
		{"xdp_nic_fec_blocks_total", []string{"result", "corrected"}, 1234},
	} {
		if got := mfs.Value(t, e.fam, append([]string{"device", "mlx5"}, e.labels...)...); got != e.want {
			t.Errorf("mlx5 %s%v = %v, want %v", e.fam, e.labels, got, e.want)
		}
	}
	if sum, n := mfs.Sum("xdp_nic_rss_indirection_entries", "device", "mlx5"); n != hostQueues || sum != 256 {
		t.Errorf("mlx5: %d queues with %v table entries, want %d with 256", n, sum, hostQueues)
	}
	if got := mfs.Value(t, "xdp_nic_rss_indirection_entries", "device", "mlx5", "queue", strconv.Itoa(hostQueues-1)); got != 4 {
		t.Errorf("mlx5 queue %d: %v entries, want 4 of 256 over 64 queues", hostQueues-1, got)
	}
	if _, n := mfs.Sum("xdp_nic_pause_frames_total", "direction", "rx"); n != 0 {
		t.Error("a pause counter the driver did not fill is sent")
	}
	if _, n := mfs.Sum("xdp_nic_fec_blocks_total", "result", "uncorrectable"); n != 0 {
		t.Error("an FEC counter the driver did not fill is sent")
	}
	if _, n := mfs.Sum("xdp_nic_fec_info", "device", "veth"); n != 0 {
		t.Error("an FEC mode bit the exporter does not know is named")
	}
	if got := mfs.Value(t, "xdp_nic_link_speed_bytes_per_second", "device", "veth"); got != 10000e6/8 {
		t.Errorf("veth link speed %v", got)
	}
	for _, fam := range []string{"xdp_nic_coalesce_delay_seconds", "xdp_nic_pause_enabled", "xdp_nic_rss_indirection_entries", "xdp_nic_rss_hash_fields_info", "xdp_nic_ntuple_rules"} {
		if _, n := mfs.Sum(fam, "device", "veth"); n != 0 {
			t.Errorf("veth refuses the call, yet %s has %d series", fam, n)
		}
	}

	gather(t, c)
	if n := src.count("HashFields", "veth"); n != len(hashFlowTypes) {
		t.Errorf("HashFields asked of veth %d times in two scrapes, want once per flow type (every type refused: given up for the device)", n)
	}
	for _, call := range []string{"Coalesce", "PauseParam", "RSS", "NtupleRules"} {
		if n := src.count(call, "veth"); n != 1 {
			t.Errorf("%s asked of veth %d times in two scrapes, want once (EOPNOTSUPP is for the device's lifetime)", call, n)
		}
		if n := src.count(call, "mlx5"); n < 2 {
			t.Errorf("%s asked of mlx5 %d times in two scrapes", call, n)
		}
	}
}

// hashFieldsEINVAL answers EINVAL for IPv6 flow types, as drivers do for
// a flow type they do not hash.
type hashFieldsEINVAL struct{ *fixtureSource }

func (s hashFieldsEINVAL) HashFields(dev string, flow uint32) (uint64, error) {
	if flow == ethtoolioctl.FlowTCP6 || flow == ethtoolioctl.FlowUDP6 {
		return 0, unix.EINVAL
	}
	return s.fixtureSource.HashFields(dev, flow)
}

// TestEthtoolHashFieldsEINVAL: a flow type the driver refuses with
// EINVAL has no series and is no error; the others are sent, on every
// scrape.
func TestEthtoolHashFieldsEINVAL(t *testing.T) {
	src := loadFixtures(t, "mlx5")
	src.devs["mlx5"].config = hostNICConfig()
	c := fixtureCollector(t, hashFieldsEINVAL{src}, "", DefaultEthtoolMetricsExclude, nil)
	for range 2 {
		if _, n := gather(t, c).Sum("xdp_nic_rss_hash_fields_info", "device", "mlx5"); n != 2 {
			t.Errorf("%d flow types sent, want tcp4 and udp4", n)
		}
	}
}

// TestHashNames spells the hash function and fields as ethtool does.
func TestHashNames(t *testing.T) {
	for bits, want := range map[uint8]string{0: "", 1: "toeplitz", 2: "xor", 4: "crc32", 3: "", 8: ""} {
		if got := hashFuncName(bits); got != want {
			t.Errorf("hashFuncName(%#x) = %q, want %q", bits, got, want)
		}
	}
	for bits, want := range map[uint64]string{0: "", 0xf0: "sdfn", 0x30: "sd", 0x3e: "mvtsd", 1<<31 | 0xf0: "discard"} {
		if got := hashFieldLetters(bits); got != want {
			t.Errorf("hashFieldLetters(%#x) = %q, want %q", bits, got, want)
		}
	}
}

// TestEthtoolConfigCaptured reads the configuration views captured from
// QEMU's e1000e and vmxnet3 under Debian's 6.12
// (collector/testdata/ethtool/config): what ethtool printed is what the
// families say, and a view the driver refused has no series.
func TestEthtoolConfigCaptured(t *testing.T) {
	src := loadFixtures(t, "e1000e", "vmxnet3")
	for _, name := range []string{"e1000e", "vmxnet3"} {
		src.devs[name].config = loadFixture(t, filepath.Join("testdata", "ethtool", "config", name+".txt")).config
	}
	mfs := gather(t, fixtureCollector(t, src, "", DefaultEthtoolMetricsExclude, nil))
	for _, e := range []struct {
		dev, fam string
		labels   []string
		want     float64
	}{
		{"e1000e", "xdp_nic_link_speed_bytes_per_second", nil, 1000e6 / 8},
		{"e1000e", "xdp_nic_link_info", []string{"duplex", "full", "autoneg", "on"}, 1},
		{"e1000e", "xdp_nic_coalesce_delay_seconds", []string{"direction", "rx"}, 3e-6},
		{"e1000e", "xdp_nic_coalesce_max_frames", []string{"direction", "rx"}, 0},
		{"e1000e", "xdp_nic_pause_autoneg_enabled", nil, 1},
		{"e1000e", "xdp_nic_pause_enabled", []string{"direction", "tx"}, 1},
		{"e1000e", "xdp_nic_rss_hash_fields_info", []string{"flow_type", "tcp4", "fields", "sdfn"}, 1},
		{"e1000e", "xdp_nic_rss_hash_fields_info", []string{"flow_type", "udp6", "fields", "sd"}, 1},
		{"vmxnet3", "xdp_nic_link_info", []string{"duplex", "full", "autoneg", "off"}, 1},
		{"vmxnet3", "xdp_nic_rss_info", []string{"hash_function", "toeplitz", "table_size", "128"}, 1},
		{"vmxnet3", "xdp_nic_rss_indirection_entries", []string{"queue", "0"}, 64},
		{"vmxnet3", "xdp_nic_rss_indirection_entries", []string{"queue", "1"}, 64},
	} {
		if got := mfs.Value(t, e.fam, append([]string{"device", e.dev}, e.labels...)...); got != e.want {
			t.Errorf("%s %s%v = %v, want %v", e.dev, e.fam, e.labels, got, e.want)
		}
	}
	for _, e := range []struct{ dev, fam string }{
		{"e1000e", "xdp_nic_rss_indirection_entries"}, {"vmxnet3", "xdp_nic_coalesce_delay_seconds"},
		{"vmxnet3", "xdp_nic_pause_enabled"}, {"vmxnet3", "xdp_nic_rss_hash_fields_info"},
	} {
		if _, n := mfs.Sum(e.fam, "device", e.dev); n != 0 {
			t.Errorf("%s refused the call, yet %s has %d series", e.dev, e.fam, n)
		}
	}
}

// TestEthtoolSettingsInterval: with --collector.nic.settings-interval a
// device's settings are read once per interval and sent from that read
// in between, while its counters are read every scrape; a reconfiguration
// that changes its channels is read at once, and so is a read that
// failed.
func TestEthtoolSettingsInterval(t *testing.T) {
	src := loadFixtures(t, "mlx5")
	src.devs["mlx5"].config = hostNICConfig()
	src.devs["mlx5"].chans = &ethtool.Channels{CombinedCount: 6, MaxCombined: 8}
	fams, err := newFamilyFilter("nic", regexp.MustCompile(""), regexp.MustCompile(DefaultEthtoolMetricsExclude), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newEthtoolCollector(EthtoolConfig{Filter: Filter{Families: fams}, SettingsInterval: time.Minute}, src, slog.New(slog.DiscardHandler))
	now := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return now }
	scrape := func(after time.Duration) (delay, rxPackets float64) {
		t.Helper()
		now = now.Add(after)
		mfs := gather(t, c)
		return mfs.Value(t, "xdp_nic_coalesce_delay_seconds", "device", "mlx5", "direction", "rx"),
			mfs.Value(t, "xdp_nic_port_packets_total", "device", "mlx5", "direction", "rx")
	}
	setDelay := func(usecs uint32) {
		src.mu.Lock()
		defer src.mu.Unlock()
		src.devs["mlx5"].config.coalesce.RxCoalesceUsecs = usecs
	}
	bumpRx := func() {
		src.mu.Lock()
		defer src.mu.Unlock()
		d := src.devs["mlx5"]
		d.vals[slices.Index(d.names, "rx_packets_phy")] += 1000
	}

	delay, rx := scrape(0)
	if delay != 8e-6 || src.count("Coalesce", "mlx5") != 1 {
		t.Fatalf("first scrape: delay %v after %d reads, want 8e-06 after 1", delay, src.count("Coalesce", "mlx5"))
	}
	setDelay(50)
	bumpRx()
	if delay, rx2 := scrape(59 * time.Second); delay != 8e-6 || rx2 != rx+1000 || src.count("Coalesce", "mlx5") != 1 {
		t.Errorf("within the interval: delay %v (want the last read's 8e-06), port packets %v (want %v), %d coalescing reads (want 1)",
			delay, rx2, rx+1000, src.count("Coalesce", "mlx5"))
	}
	if delay, _ := scrape(time.Second); delay != 50e-6 || src.count("Coalesce", "mlx5") != 2 {
		t.Errorf("after the interval: delay %v after %d reads, want 5e-05 after 2", delay, src.count("Coalesce", "mlx5"))
	}

	setDelay(20)
	src.mu.Lock()
	src.devs["mlx5"].chans.CombinedCount--
	src.mu.Unlock()
	if delay, _ := scrape(time.Second); delay != 20e-6 || src.count("Coalesce", "mlx5") != 3 {
		t.Errorf("after ethtool -L: delay %v after %d reads, want 2e-05 at once", delay, src.count("Coalesce", "mlx5"))
	}

	src.failing("Ring", unix.EIO)
	now = now.Add(time.Minute)
	if _, err := pedantic(t, c); err == nil {
		t.Error("a failed GRINGPARAM is not the collector's error")
	}
	src.failing("Ring", nil)
	now = now.Add(time.Second)
	if _, err := pedantic(t, c); err != nil || src.count("Ring", "mlx5") != 5 {
		t.Errorf("the scrape after a failed read: %v, %d ring reads, want it read again (5)", err, src.count("Ring", "mlx5"))
	}
}
