package uncore

import (
	"embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// events holds, per model, the records of the events this package
// counts, as Linux perf's pmu-events JSON holds them
// (tools/perf/pmu-events/arch/x86/<model>/uncore-*.json): Intel's
// event files (github.com/intel/perfmon, the version each Model names)
// converted as perf's create_perf_json.py converts them, UMaskExt folded
// above UMask and PortMask/FCMask kept apart, with the Skylake-SP and
// Cascade Lake CHA filter in config1's upper word, where Linux commit
// 7a75c6c23a2e ("perf vendor events: SKX, CLX, SNR uncore cache event
// fixes") moved it and the kernel's filter_opc_0 format (config1:41-50)
// expects it.
//
//go:embed events/*.json
var events embed.FS

// Model is a server CPU whose uncore events this package knows.
type Model struct {
	Name   string // Ice Lake-SP
	Perf   string // perf's pmu-events directory: icelakex
	Source string // Intel's event files and version the records come from
	// Parts is how many PCIe ports (parts) an IIO stack has; the IIO
	// traffic events are counted for all at once.
	Parts int
	// DDIO names the CHA TOR_INSERTS events per request type; a model
	// whose JSON has no hit event counts misses alone.
	DDIO []DDIORequest
}

// DDIORequest is one kind of device request to memory and the events
// that count those that hit and that missed the LLC.
type DDIORequest struct {
	Request   string // itom, itomcachenear, pcirdcur
	Hit, Miss string
}

// IIOTraffic is one of perf iostat's four figures of a PCIe root port,
// and the IIO event (before .PART<n>) that counts it in 4-byte words.
type IIOTraffic struct {
	Direction, Op, Event string
}

// IIOTraffics: inbound is what the devices ask of memory, outbound what
// the CPUs ask of the devices (MMIO).
var IIOTraffics = []IIOTraffic{
	{"inbound", "write", "UNC_IIO_DATA_REQ_OF_CPU.MEM_WRITE"},
	{"inbound", "read", "UNC_IIO_DATA_REQ_OF_CPU.MEM_READ"},
	{"outbound", "write", "UNC_IIO_DATA_REQ_BY_CPU.MEM_WRITE"},
	{"outbound", "read", "UNC_IIO_DATA_REQ_BY_CPU.MEM_READ"},
}

// IIOWordBytes: the DATA_REQ events count 4-byte words (their JSON
// description: "Number of DWs (4 bytes)").
const IIOWordBytes = 4

var (
	ddioFull = []DDIORequest{
		{"itom", "UNC_CHA_TOR_INSERTS.IO_HIT_ITOM", "UNC_CHA_TOR_INSERTS.IO_MISS_ITOM"},
		{"itomcachenear", "UNC_CHA_TOR_INSERTS.IO_HIT_ITOMCACHENEAR", "UNC_CHA_TOR_INSERTS.IO_MISS_ITOMCACHENEAR"},
		{"pcirdcur", "UNC_CHA_TOR_INSERTS.IO_HIT_PCIRDCUR", "UNC_CHA_TOR_INSERTS.IO_MISS_PCIRDCUR"},
	}
	// Skylake-SP and Cascade Lake: Intel publishes the IO misses only,
	// as experimental events.
	ddioMisses = []DDIORequest{
		{"itom", "", "UNC_CHA_TOR_INSERTS.IO_MISS_ITOM"},
		{"pcirdcur", "", "UNC_CHA_TOR_INSERTS.IO_MISS_RDCUR"},
	}
)

// The supported models. Granite Rapids (family 6 models 0xAD, 0xAE) is
// left out until its IIO and CHA encodings are checked against a kernel
// that drives it.
var (
	skylakeSP    = &Model{"Skylake-SP", "skylakex", "intel/perfmon SKX/events/skylakex_uncore.json, skylakex_uncore_experimental.json V1.37", 4, ddioMisses}
	cascadeLake  = &Model{"Cascade Lake", "cascadelakex", "intel/perfmon CLX/events/cascadelakex_uncore.json, cascadelakex_uncore_experimental.json V1.25", 4, ddioMisses}
	iceLakeSP    = &Model{"Ice Lake-SP", "icelakex", "intel/perfmon ICX/events/icelakex_uncore.json V1.30", 8, ddioFull}
	sapphire     = &Model{"Sapphire Rapids", "sapphirerapids", "intel/perfmon SPR/events/sapphirerapids_uncore.json V1.39", 8, ddioFull}
	emeraldRapid = &Model{"Emerald Rapids", "emeraldrapids", "intel/perfmon EMR/events/emeraldrapids_uncore.json V1.24", 8, ddioFull}
)

// Models lists the supported models.
func Models() []*Model {
	return []*Model{skylakeSP, cascadeLake, iceLakeSP, sapphire, emeraldRapid}
}

// ModelOf finds the model of an x86 CPU, as perf's mapfile.csv matches
// GenuineIntel-<family>-<model>[-<stepping>]; nil if it is not one of
// the supported models.
func ModelOf(vendor string, family, model, stepping int) *Model {
	if vendor != "GenuineIntel" || family != 6 {
		return nil
	}
	switch model {
	case 0x55:
		if stepping <= 4 {
			return skylakeSP
		}
		return cascadeLake
	case 0x6a, 0x6c:
		return iceLakeSP
	case 0x8f:
		return sapphire
	case 0xcf:
		return emeraldRapid
	}
	return nil
}

// record is one event of perf's JSON; only the fields that encode it.
type record struct {
	EventCode, EventName, UMask, PortMask, FCMask, Filter, Unit string
}

func (m *Model) records() (map[string]record, error) {
	b, err := events.ReadFile("events/" + m.Perf + ".json")
	if err != nil {
		return nil, err
	}
	var list []record
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("events/%s.json: %w", m.Perf, err)
	}
	out := map[string]record{}
	for _, r := range list {
		out[r.EventName] = r
	}
	return out, nil
}

// Terms is the perf event string of every event the model counts, by
// perf's JSON name (an IIO traffic event by its name before .PART<n>),
// read from the model's JSON once.
func (m *Model) Terms() (map[string]string, error) {
	recs, err := m.records()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range m.DDIO {
		for _, name := range []string{r.Hit, r.Miss} {
			if name == "" {
				continue
			}
			rec, ok := recs[name]
			if !ok {
				return nil, fmt.Errorf("%s: %s is not in perf's %s events", m.Name, name, m.Perf)
			}
			out[name] = rec.terms()
		}
	}
	for _, t := range IIOTraffics {
		if out[t.Event], err = m.allParts(recs, t.Event); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// terms is the perf event string of a record, built as perf's jevents.py
// builds it: event=EventCode, umask=UMask, ch_mask=PortMask,
// fc_mask=FCMask, then the Filter's terms.
func (r record) terms() string {
	terms := []string{"event=" + r.EventCode}
	for _, t := range []struct{ name, value string }{
		{"umask", r.UMask}, {"ch_mask", r.PortMask}, {"fc_mask", r.FCMask},
	} {
		if v, err := strconv.ParseUint(t.value, 0, 64); err == nil && v != 0 {
			terms = append(terms, t.name+"="+t.value)
		}
	}
	if r.Filter != "" {
		terms = append(terms, r.Filter)
	}
	return strings.Join(terms, ",")
}

// allParts is the event string that counts an IIO event on every part
// of the stack at once: the parts' events (base.PART0 ..) differ only in
// their PortMask, one bit each, and the IIO counter's ch_mask selects
// every port whose bit is set, as perf iostat's ch_mask=0xf does on
// Skylake-SP.
func (m *Model) allParts(recs map[string]record, base string) (string, error) {
	var all record
	var mask uint64
	for p := range m.Parts {
		name := fmt.Sprintf("%s.PART%d", base, p)
		r, ok := recs[name]
		if !ok {
			return "", fmt.Errorf("%s: %s is not in perf's %s events", m.Name, name, m.Perf)
		}
		v, err := strconv.ParseUint(r.PortMask, 0, 64)
		if err != nil {
			return "", fmt.Errorf("%s: PortMask %q: %w", name, r.PortMask, err)
		}
		if p == 0 {
			all = r
		} else if !sameButPort(all, r) {
			return "", fmt.Errorf("%s: %s differs from PART0 in more than its port", m.Name, name)
		}
		mask |= v
	}
	all.PortMask = fmt.Sprintf("%#x", mask)
	return all.terms(), nil
}

func sameButPort(a, b record) bool {
	num := func(s string) uint64 { v, _ := strconv.ParseUint(s, 0, 64); return v }
	return num(a.EventCode) == num(b.EventCode) && num(a.UMask) == num(b.UMask) &&
		num(a.FCMask) == num(b.FCMask) && a.Filter == b.Filter && a.Unit == b.Unit
}

// Detect finds the model of the host's first CPU in procfs's cpuinfo:
// the model (nil if not in the table) and the CPU as cpuinfo names it,
// for the log.
func Detect(procFS string) (*Model, string, error) {
	fs, err := procfs.NewFS(procFS)
	if err != nil {
		return nil, "", err
	}
	cpus, err := fs.CPUInfo()
	if err != nil {
		return nil, "", err
	}
	if len(cpus) == 0 {
		return nil, "", fmt.Errorf("%s/cpuinfo lists no CPU", procFS)
	}
	c := cpus[0]
	family, _ := strconv.Atoi(c.CPUFamily)
	model, _ := strconv.Atoi(c.Model)
	stepping, _ := strconv.Atoi(c.Stepping)
	name := fmt.Sprintf("%s (%s family %d model %#x stepping %d)", c.ModelName, c.VendorID, family, model, stepping)
	return ModelOf(c.VendorID, family, model, stepping), name, nil
}
