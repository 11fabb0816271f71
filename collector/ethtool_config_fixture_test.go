package collector

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolnl"
)

// fixtureConfig is a device's configuration as its captured ethtool output
// shows it; nil where the capture has no such section (the driver refused
// the call, EOPNOTSUPP).
type fixtureConfig struct {
	link     *ethtoolioctl.Link
	coalesce *ethtool.Coalesce
	pause    *ethtool.Pause
	pauseRX  *uint64 // ethtool -I -a Statistics
	pauseTX  *uint64
	rss      *ethtoolioctl.RSS
	fields   map[uint32]uint64
	ntuple   *uint32
}

// hashFlowHeadings are ethtool's names of the flow types of
// `-n DEV rx-flow-hash` (dump_rxfhash in ethtool's ethtool.c).
var hashFlowHeadings = map[string]uint32{
	"TCP over IPV4 flows": ethtoolioctl.FlowTCP4, "UDP over IPV4 flows": ethtoolioctl.FlowUDP4,
	"TCP over IPV6 flows": ethtoolioctl.FlowTCP6, "UDP over IPV6 flows": ethtoolioctl.FlowUDP6,
}

// hashFieldNames are ethtool's lines for the RXH_* bits
// (unparse_rxfhashopts).
var hashFieldNames = map[string]uint64{
	"L2DA": 1 << 1, "VLAN tag": 1 << 2, "L3 proto": 1 << 3, "IP SA": 1 << 4, "IP DA": 1 << 5,
	"L4 bytes 0 & 1 [TCP/UDP src port]": 1 << 6, "L4 bytes 2 & 3 [TCP/UDP dst port]": 1 << 7, "None": 0,
}

// configHeading recognises the first line of a configuration section.
func (d *fixtureDev) configHeading(line, section, sub string) (string, string, bool) {
	c := &d.config
	switch {
	case strings.HasPrefix(line, "Settings for "):
		c.link = &ethtoolioctl.Link{SpeedMbps: ethtoolioctl.SpeedUnknown, Duplex: 0xff}
		return "settings", "", true
	case strings.HasPrefix(line, "Coalesce parameters for "):
		c.coalesce = &ethtool.Coalesce{}
		return "coalesce", "", true
	case strings.HasPrefix(line, "Pause parameters for "):
		c.pause = &ethtool.Pause{}
		return "pause", "", true
	case section == "pause" && line == "Statistics:":
		return "pause", "stats", true
	case strings.HasPrefix(line, "RX flow hash indirection table for "):
		c.rss = &ethtoolioctl.RSS{}
		return "rss", "table", true
	case section == "rss" && line == "RSS hash key:":
		return "rss", "key", true
	case section == "rss" && line == "RSS hash function:":
		return "rss", "func", true
	case section == "rss" && strings.HasPrefix(line, "RSS input transformation:"):
		return "rss", "xfrm", true
	case strings.HasSuffix(line, " RX rings available"):
		return "ntuple", "", true
	}
	for name, flow := range hashFlowHeadings {
		if strings.HasPrefix(line, name+" use these fields") {
			if c.fields == nil {
				c.fields = map[uint32]uint64{}
			}
			c.fields[flow] = 0
			return "fields", strconv.Itoa(int(flow)), true
		}
	}
	return section, sub, false
}

// configLine records one line of a configuration section; handled is
// false for lines of the other sections.
func (d *fixtureDev) configLine(section, sub, line string) (handled bool, err error) {
	c := &d.config
	key, val, _ := strings.Cut(line, ":")
	key, val = strings.TrimSpace(key), strings.TrimSpace(val)
	switch section {
	case "settings":
		return true, c.settingsLine(key, val)
	case "coalesce":
		return true, c.coalesceLine(key, val)
	case "pause":
		return true, c.pauseLine(sub, key, val)
	case "rss":
		return true, c.rssLine(sub, key, val)
	case "fields":
		flow, _ := strconv.Atoi(sub)
		bit, ok := hashFieldNames[line]
		if !ok {
			return true, errors.New("unknown hash field")
		}
		c.fields[uint32(flow)] |= bit
		return true, nil
	case "ntuple":
		var n uint32
		if _, err := fmt.Sscanf(line, "Total %d rules", &n); err != nil {
			return true, nil // the rules themselves, when there are some
		}
		c.ntuple = &n
		return true, nil
	}
	return false, nil
}

func (c *fixtureConfig) settingsLine(key, val string) error {
	switch key {
	case "Speed":
		if mbps, ok := strings.CutSuffix(val, "Mb/s"); ok {
			v, err := strconv.ParseUint(mbps, 10, 32)
			if err != nil {
				return fmt.Errorf("bad speed %q", val)
			}
			c.link.SpeedMbps = uint32(v)
		}
	case "Duplex":
		c.link.Duplex = map[string]uint8{"Half": 0, "Full": 1}[val]
		if val != "Half" && val != "Full" {
			c.link.Duplex = 0xff
		}
	case "Auto-negotiation":
		c.link.Autoneg = val == "on"
	}
	return nil // lines without a colon continue the link mode lists
}

func (c *fixtureConfig) coalesceLine(key, val string) error {
	if key == "Adaptive RX" { // "Adaptive RX: on  TX: off"
		rx, tx, _ := strings.Cut(val, "TX:")
		c.coalesce.UseAdaptiveRxCoalesce = onBit(strings.TrimSpace(rx))
		c.coalesce.UseAdaptiveTxCoalesce = onBit(strings.TrimSpace(tx))
		return nil
	}
	return setNum(map[string]*uint32{
		"rx-usecs": &c.coalesce.RxCoalesceUsecs, "rx-frames": &c.coalesce.RxMaxCoalescedFrames,
		"tx-usecs": &c.coalesce.TxCoalesceUsecs, "tx-frames": &c.coalesce.TxMaxCoalescedFrames,
	}[key], val)
}

func (c *fixtureConfig) pauseLine(sub, key, val string) error {
	if sub == "stats" {
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return errors.New("bad value")
		}
		switch key {
		case "rx_pause_frames":
			c.pauseRX = &v
		case "tx_pause_frames":
			c.pauseTX = &v
		}
		return nil
	}
	switch key {
	case "Autonegotiate":
		c.pause.Autoneg = onBit(val)
	case "RX":
		c.pause.RxPause = onBit(val)
	case "TX":
		c.pause.TxPause = onBit(val)
	}
	return nil
}

// rssLine reads the indirection table's rows ("8:  0 1 2 3 ..."), skips the
// key, and takes the hash function that is on.
func (c *fixtureConfig) rssLine(sub, key, val string) error {
	switch sub {
	case "table":
		row, err := strconv.Atoi(key)
		if err != nil || row != len(c.rss.Indir) {
			return fmt.Errorf("indirection table row %q out of order", key)
		}
		for _, f := range strings.Fields(val) {
			q, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return fmt.Errorf("bad queue %q", f)
			}
			c.rss.Indir = append(c.rss.Indir, uint32(q))
		}
	case "func":
		for i, name := range ethtoolioctl.HashFuncNames {
			if key == name && val == "on" {
				c.rss.HashFunc = 1 << i
			}
		}
	}
	return nil
}

func onBit(s string) uint32 {
	if s == "on" {
		return 1
	}
	return 0
}

// config answers a configuration call from the device's captured section,
// EOPNOTSUPP where the capture has none.
func fixtureCall[T any](s *fixtureSource, call, name string, get func(*fixtureConfig) (T, bool)) (T, error) {
	var zero T
	d, err := s.dev(call, name)
	if err != nil {
		return zero, err
	}
	v, ok := get(&d.config)
	if !ok {
		return zero, unix.EOPNOTSUPP
	}
	return v, nil
}

func (s *fixtureSource) LinkSettings(name string) (ethtoolioctl.Link, error) {
	return fixtureCall(s, "LinkSettings", name, func(c *fixtureConfig) (ethtoolioctl.Link, bool) { return deref(c.link) })
}

func (s *fixtureSource) Coalesce(name string) (ethtool.Coalesce, error) {
	return fixtureCall(s, "Coalesce", name, func(c *fixtureConfig) (ethtool.Coalesce, bool) { return deref(c.coalesce) })
}

func (s *fixtureSource) PauseParam(name string) (ethtool.Pause, error) {
	return fixtureCall(s, "PauseParam", name, func(c *fixtureConfig) (ethtool.Pause, bool) { return deref(c.pause) })
}

func (s *fixtureSource) RSS(name string) (ethtoolioctl.RSS, error) {
	return fixtureCall(s, "RSS", name, func(c *fixtureConfig) (ethtoolioctl.RSS, bool) { return deref(c.rss) })
}

func (s *fixtureSource) HashFields(name string, flow uint32) (uint64, error) {
	return fixtureCall(s, "HashFields", name, func(c *fixtureConfig) (uint64, bool) {
		v, ok := c.fields[flow]
		return v, ok
	})
}

func (s *fixtureSource) NtupleRules(name string) (uint32, error) {
	return fixtureCall(s, "NtupleRules", name, func(c *fixtureConfig) (uint32, bool) { return deref(c.ntuple) })
}

// PauseStats is the devices' captured pause statistics, or what the test
// set in std.
func (s *fixtureSource) PauseStats() ([]ethtoolnl.Pause, error) {
	s.mu.Lock()
	var out []ethtoolnl.Pause
	for name, d := range s.devs {
		c := d.config
		if c.pause == nil || s.std.pause != nil || s.std.pauseErr != nil {
			continue
		}
		p := ethtoolnl.Pause{Ifindex: uint32(s.index[name]), Name: name, Autoneg: c.pause.Autoneg != 0, RX: c.pause.RxPause != 0, TX: c.pause.TxPause != 0}
		if c.pauseRX != nil {
			p.RXFrames, p.HasRXFrames = *c.pauseRX, true
		}
		if c.pauseTX != nil {
			p.TXFrames, p.HasTXFrames = *c.pauseTX, true
		}
		out = append(out, p)
	}
	if s.std.pause != nil {
		out = s.std.pause
	}
	s.mu.Unlock()
	return standard(s, "PauseStats", out, s.std.pauseErr)
}

func deref[T any](p *T) (T, bool) {
	if p == nil {
		var zero T
		return zero, false
	}
	return *p, true
}
