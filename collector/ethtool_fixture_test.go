package collector

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
)

// fixtureDev is one device read from captured `ethtool -i`, `-S`, `-g`,
// `-l` and `--show-priv-flags` output, and the configuration's `ethtool
// DEV`, `-c`, `-I -a`, `-x`, `-n` and `-n DEV rx-flow-hash FLOW`
// (collector/testdata/ethtool).
type fixtureDev struct {
	info      ethtoolioctl.DriverInfo
	names     []string
	vals      []uint64
	ring      *ethtool.Ring
	chans     *ethtool.Channels
	privNames []string
	priv      uint32
	config    fixtureConfig
}

func loadFixture(t testing.TB, path string) *fixtureDev {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := parseFixture(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return d
}

// parseFixture reads one device's captured ethtool output; the fuzz target
// FuzzEthtoolDump feeds it mutated dumps, so bad input is an error, not a
// test failure.
func parseFixture(r io.Reader) (*fixtureDev, error) {
	d := &fixtureDev{}
	section, sub := "info", ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, u, ok := d.heading(line, section, sub); ok {
			section, sub = s, u
			continue
		}
		if s, u, ok := d.configHeading(line, section, sub); ok {
			section, sub = s, u
			continue
		}
		if handled, err := d.configLine(section, sub, line); handled {
			if err != nil {
				return nil, fmt.Errorf("%w in %q", err, line)
			}
			continue
		}
		// Stat names may contain ": " (bnxt's "[0]: rx_ucast_packets")
		// and values may contain ':' (bus-info), never both.
		i := strings.LastIndex(line, ":")
		if section == "info" {
			i = strings.Index(line, ":")
		}
		if i < 0 {
			return nil, fmt.Errorf("unparsable line %q", line)
		}
		if err := d.field(section, sub, strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])); err != nil {
			return nil, fmt.Errorf("%w in %q", err, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	d.info.NStats, d.info.NPrivFlags = len(d.names), len(d.privNames)
	return d, nil
}

// heading recognises a line that starts a section (ethtool -S, -g, -l,
// --show-priv-flags) or a part of one (maximums, current settings).
func (d *fixtureDev) heading(line, section, sub string) (string, string, bool) {
	switch {
	case line == "NIC statistics:":
		return "stats", sub, true
	case strings.HasPrefix(line, "Ring parameters for"):
		d.ring = &ethtool.Ring{}
		return "ring", sub, true
	case strings.HasPrefix(line, "Channel parameters for"):
		d.chans = &ethtool.Channels{}
		return "chans", sub, true
	case strings.HasPrefix(line, "Private flags for"):
		return "priv", sub, true
	case line == "Pre-set maximums:":
		return section, "max", true
	case line == "Current hardware settings:":
		return section, "cur", true
	}
	return section, sub, false
}

// field records one "key: value" line of a section.
func (d *fixtureDev) field(section, sub, key, val string) error {
	switch section {
	case "info":
		switch key {
		case "driver":
			d.info.Driver = val
		case "version":
			d.info.Version = val
		case "firmware-version":
			d.info.FirmwareVersion = val
		case "bus-info":
			d.info.BusInfo = val
		}
	case "stats":
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return errors.New("bad value")
		}
		d.names = append(d.names, key)
		d.vals = append(d.vals, v)
	case "ring":
		return setNum(map[string]*uint32{
			"max RX": &d.ring.RxMaxPending, "max TX": &d.ring.TxMaxPending,
			"cur RX": &d.ring.RxPending, "cur TX": &d.ring.TxPending,
		}[sub+" "+key], val)
	case "chans":
		return setNum(map[string]*uint32{
			"max RX": &d.chans.MaxRx, "max TX": &d.chans.MaxTx, "max Other": &d.chans.MaxOther, "max Combined": &d.chans.MaxCombined,
			"cur RX": &d.chans.RxCount, "cur TX": &d.chans.TxCount, "cur Other": &d.chans.OtherCount, "cur Combined": &d.chans.CombinedCount,
		}[sub+" "+key], val)
	case "priv":
		if val == "on" {
			d.priv |= 1 << len(d.privNames)
		}
		d.privNames = append(d.privNames, key)
	}
	return nil
}

// setNum stores a ring or channel count ("n/a" is 0) where p points, if
// the field is one the collector reads.
func setNum(p *uint32, s string) error {
	if p == nil {
		return nil
	}
	if s == "n/a" {
		*p = 0
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("bad number %q", s)
	}
	*p = uint32(v)
	return nil
}

// fixtureSource answers the collector from fixtures and counts the calls it
// gets, so tests can check what is cached. The standard sources answer
// what std holds: none by default, as a dump of ethtool -S captures none.
type fixtureSource struct {
	mu    sync.Mutex
	devs  map[string]*fixtureDev
	index map[string]int
	gone  map[string]bool  // answer ENODEV, as for a deleted interface
	calls map[string]int   // "StatNames eth0" -> count
	fail  map[string]error // call -> the error every device answers
	std   fixtureStandard
}

func newFixtureSource(devs map[string]*fixtureDev) *fixtureSource {
	s := &fixtureSource{devs: devs, index: map[string]int{}, gone: map[string]bool{}, calls: map[string]int{}, fail: map[string]error{}}
	names := make([]string, 0, len(devs))
	for n := range devs {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		s.index[n] = i + 2
	}
	return s
}

// allFixtures is every captured driver dump of testdata/ethtool.
func allFixtures(t testing.TB) *fixtureSource {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "ethtool", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".txt"))
	}
	return loadFixtures(t, names...)
}

func loadFixtures(t testing.TB, names ...string) *fixtureSource {
	devs := map[string]*fixtureDev{}
	for _, n := range names {
		devs[n] = loadFixture(t, filepath.Join("testdata", "ethtool", n+".txt"))
	}
	return newFixtureSource(devs)
}

func (s *fixtureSource) dev(call, name string) (*fixtureDev, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[call+" "+name]++
	d, ok := s.devs[name]
	if !ok || s.gone[name] {
		return nil, unix.ENODEV
	}
	if err := s.fail[call]; err != nil {
		return nil, err
	}
	return d, nil
}

// failing makes every device answer call with err (nil: as the fixture).
func (s *fixtureSource) failing(call string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[call] = err
}

func (s *fixtureSource) Devices(*LinkSnapshot) ([]ethtoolDevice, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ethtoolDevice, 0, len(s.devs))
	for n := range s.devs {
		out = append(out, ethtoolDevice{Name: n, Label: deviceLabel(n), Index: s.index[n]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *fixtureSource) DriverInfo(name string) (ethtoolioctl.DriverInfo, error) {
	d, err := s.dev("DriverInfo", name)
	if err != nil {
		return ethtoolioctl.DriverInfo{}, err
	}
	return d.info, nil
}

func (s *fixtureSource) StatNames(name string, n int) ([]string, error) {
	d, err := s.dev("StatNames", name)
	if err != nil {
		return nil, err
	}
	if n != len(d.names) {
		return nil, ethtoolioctl.ErrStatsChanged
	}
	return append([]string(nil), d.names...), nil
}

func (s *fixtureSource) Stats(name string, n int, dst []uint64) ([]uint64, error) {
	d, err := s.dev("Stats", name)
	if err != nil {
		return dst, err
	}
	if n != len(d.vals) {
		return dst, fmt.Errorf("%w: %d, expected %d", ethtoolioctl.ErrStatsChanged, len(d.vals), n)
	}
	return append(dst[:0], d.vals...), nil
}

func (s *fixtureSource) Channels(name string) (ethtool.Channels, error) {
	d, err := s.dev("Channels", name)
	if err != nil {
		return ethtool.Channels{}, err
	}
	if d.chans == nil {
		return ethtool.Channels{}, unix.EOPNOTSUPP
	}
	return *d.chans, nil
}

func (s *fixtureSource) Ring(name string) (ethtool.Ring, error) {
	d, err := s.dev("Ring", name)
	if err != nil {
		return ethtool.Ring{}, err
	}
	if d.ring == nil {
		return ethtool.Ring{}, unix.EOPNOTSUPP
	}
	return *d.ring, nil
}

func (s *fixtureSource) PrivFlagNames(name string) ([]string, error) {
	d, err := s.dev("PrivFlagNames", name)
	if err != nil {
		return nil, err
	}
	return d.privNames, nil
}

func (s *fixtureSource) PrivFlags(name string) (uint32, error) {
	d, err := s.dev("PrivFlags", name)
	if err != nil {
		return 0, err
	}
	return d.priv, nil
}

func (s *fixtureSource) Close() error { return nil }

func (s *fixtureSource) count(call, dev string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[call+" "+dev]
}

func (s *fixtureSource) set(name string, d *fixtureDev) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devs[name] = d
	if _, ok := s.index[name]; !ok {
		s.index[name] = len(s.index) + 2
	}
}
