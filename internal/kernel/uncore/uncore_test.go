package uncore

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// want is an event's config and config1, worked out by hand from the
// event's fields in perf's JSON and the bit positions of the kernel's
// format attributes (fixture_test.go): the check that does not go
// through the code under test.
type want struct{ config, config1 uint64 }

// IIO traffic, all parts: event | umask<<8 | ch_mask<<36 | fc_mask<<44
// (Skylake-SP, four parts: ch_mask 0xf, perf iostat's encoding) or
// fc_mask<<48 (Ice Lake-SP on, eight parts: ch_mask 0xff).
var (
	skxIIOWant = map[string]want{
		"UNC_IIO_DATA_REQ_OF_CPU.MEM_WRITE": {0x0000_70f0_0000_0183, 0},
		"UNC_IIO_DATA_REQ_OF_CPU.MEM_READ":  {0x0000_70f0_0000_0483, 0},
		"UNC_IIO_DATA_REQ_BY_CPU.MEM_WRITE": {0x0000_70f0_0000_01c0, 0},
		"UNC_IIO_DATA_REQ_BY_CPU.MEM_READ":  {0x0000_70f0_0000_04c0, 0},
	}
	icxIIOWant = map[string]want{
		"UNC_IIO_DATA_REQ_OF_CPU.MEM_WRITE": {0x0007_0ff0_0000_0183, 0},
		"UNC_IIO_DATA_REQ_OF_CPU.MEM_READ":  {0x0007_0ff0_0000_0483, 0},
		"UNC_IIO_DATA_REQ_BY_CPU.MEM_WRITE": {0x0007_0ff0_0000_01c0, 0},
		"UNC_IIO_DATA_REQ_BY_CPU.MEM_READ":  {0x0007_0ff0_0000_04c0, 0},
	}
	// Skylake-SP and Cascade Lake: TOR_INSERTS (0x35), umask 0x24 (IO
	// misses), the opcode filter in config1's upper word.
	skxDDIOWant = map[string]want{
		"UNC_CHA_TOR_INSERTS.IO_MISS_ITOM":  {0x2435, 0x4_9033_0000_0000},
		"UNC_CHA_TOR_INSERTS.IO_MISS_RDCUR": {0x2435, 0x4_3c33_0000_0000},
	}
	// Ice Lake-SP on: umask 0x04 in bits 8-15, the extension above bit 32.
	icxDDIOWant = map[string]want{
		"UNC_CHA_TOR_INSERTS.IO_HIT_ITOM":           {0x00cc_43fd_0000_0435, 0},
		"UNC_CHA_TOR_INSERTS.IO_MISS_ITOM":          {0x00cc_43fe_0000_0435, 0},
		"UNC_CHA_TOR_INSERTS.IO_HIT_ITOMCACHENEAR":  {0x00cd_43fd_0000_0435, 0},
		"UNC_CHA_TOR_INSERTS.IO_MISS_ITOMCACHENEAR": {0x00cd_43fe_0000_0435, 0},
		"UNC_CHA_TOR_INSERTS.IO_HIT_PCIRDCUR":       {0x00c8_f3fd_0000_0435, 0},
		"UNC_CHA_TOR_INSERTS.IO_MISS_PCIRDCUR":      {0x00c8_f3fe_0000_0435, 0},
	}
	modelWant = map[*Model][2]map[string]want{
		skylakeSP: {skxDDIOWant, skxIIOWant}, cascadeLake: {skxDDIOWant, skxIIOWant},
		iceLakeSP: {icxDDIOWant, icxIIOWant}, sapphire: {icxDDIOWant, icxIIOWant}, emeraldRapid: {icxDDIOWant, icxIIOWant},
	}
)

// TestPlanEncodesEveryModel lays out every supported model's groups on
// its fixture host and checks each event's attr against the hand-worked
// encoding, the PMU type it goes to, and that every box of each socket
// has its groups.
func TestPlanEncodesEveryModel(t *testing.T) {
	for _, f := range modelFixtures {
		t.Run(f.model.Perf, func(t *testing.T) {
			sys := t.TempDir()
			writeHost(t, sys, f)
			groups, _, err := Plan(sys, f.model)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, g := range groups {
				for _, e := range g.Events {
					seen[e.Name]++
					w, ok := modelWant[f.model][0][e.Name]
					typ := uint32(typeCHA)
					if !ok {
						w, ok = modelWant[f.model][1][e.Name]
						typ = typeIIO
					}
					if !ok {
						continue
					}
					if e.Config != w.config || e.Config1 != w.config1 {
						t.Errorf("%s on %s: config %#x config1 %#x, want %#x %#x", e.Name, g.PMU, e.Config, e.Config1, w.config, w.config1)
					}
					kind := map[uint32]string{typeCHA: "uncore_cha_", typeIIO: "uncore_iio_"}[typ]
					if !strings.HasPrefix(g.PMU, kind) || e.Type < typ || e.Type >= typ+10 {
						t.Errorf("%s opened on %s (type %d)", e.Name, g.PMU, e.Type)
					}
				}
			}
			for _, m := range modelWant[f.model] {
				for name := range m {
					// Every box on both sockets: 2 CHA or 3 IIO boxes x 2 CPUs.
					boxes := 2 * fixtureCHABoxes
					if strings.HasPrefix(name, "UNC_IIO") {
						boxes = 2 * len(fixtureRootBuses)
					}
					if seen[name] != boxes {
						t.Errorf("%s laid out %d times, want %d", name, seen[name], boxes)
					}
				}
			}
		})
	}
}

// TestSkylakeFilterIsTheOpcodeFilter: the config1 perf's JSON gives the
// Skylake-SP ItoM miss event is the CHA filter's named fields (remote
// and local, near and not-near memory, opcode 0x248, ItoM) placed
// through the kernel's format files.
func TestSkylakeFilterIsTheOpcodeFilter(t *testing.T) {
	formats := map[string]Format{}
	for n, s := range skxCHA {
		f, err := ParseFormat(s)
		if err != nil {
			t.Fatal(err)
		}
		formats[n] = f
	}
	terms, err := ParseTerms("filter_rem=1,filter_loc=1,filter_nm=1,filter_not_nm=1,filter_opc0=0x248")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Encode(typeCHA, formats, terms)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config1 != skxDDIOWant["UNC_CHA_TOR_INSERTS.IO_MISS_ITOM"].config1 {
		t.Errorf("named filter fields give config1 %#x, perf's JSON %#x", a.Config1, skxDDIOWant["UNC_CHA_TOR_INSERTS.IO_MISS_ITOM"].config1)
	}
}

// TestPlanStacksAndFreeRunning: each IIO box's stack on each socket
// carries the root bus of the die its cpumask CPU is on, and the
// free-running counters are the kernel's named events with their scale.
func TestPlanStacksAndFreeRunning(t *testing.T) {
	sys := t.TempDir()
	writeHost(t, sys, modelFixtures[0])
	groups, stacks, err := Plan(sys, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := stacks
	wantStacks := []Stack{
		{0, 0, "0000:00"}, {1, 0, "0000:80"}, {0, 1, "0000:3a"}, {1, 1, "0000:ae"}, {0, 2, "0000:5d"}, {1, 2, "0000:d7"},
	}
	if len(got) != len(wantStacks) {
		t.Fatalf("stacks %v, want %v", got, wantStacks)
	}
	for i := range got {
		if got[i] != wantStacks[i] {
			t.Errorf("stack %d: %+v, want %+v", i, got[i], wantStacks[i])
		}
	}
	// Without a model only the free-running counters: 4 in + 4 out ports
	// per box, 3 boxes, 2 sockets; bw_in_port2 is event=0xff,umask=0x22.
	if len(groups) != 8*3*2 {
		t.Fatalf("%d groups without a model, want 48", len(groups))
	}
	port2 := 0
	for _, g := range groups {
		if g.Events[0].Name == "uncore_iio_free_running_1/bw_in_port2" {
			port2++
			if g.Events[0].Config != 0x22ff || g.Events[0].Type != typeFreeRunning+1 {
				t.Errorf("bw_in_port2: type %d config %#x, want %d 0x22ff", g.Events[0].Type, g.Events[0].Config, typeFreeRunning+1)
			}
		}
		if g.Names[0] != KindFreeRunning || g.counter.pmu != "" {
			t.Errorf("%v: a free-running group reports %v", g.Events, g.Names)
		}
	}
	if port2 != 2 {
		t.Errorf("uncore_iio_free_running_1/bw_in_port2 laid out %d times, want once per socket", port2)
	}
}

func TestModelOf(t *testing.T) {
	for _, c := range []struct {
		vendor                  string
		family, model, stepping int
		want                    *Model
	}{
		{"GenuineIntel", 6, 0x55, 4, skylakeSP},
		{"GenuineIntel", 6, 0x55, 7, cascadeLake},
		{"GenuineIntel", 6, 0x6a, 6, iceLakeSP},
		{"GenuineIntel", 6, 0x8f, 8, sapphire},
		{"GenuineIntel", 6, 0xcf, 2, emeraldRapid},
		{"GenuineIntel", 6, 0xad, 1, nil}, // Granite Rapids: not checked yet
		{"GenuineIntel", 6, 0x97, 2, nil}, // Alder Lake desktop
		{"AuthenticAMD", 25, 0x11, 1, nil},
	} {
		if got := ModelOf(c.vendor, c.family, c.model, c.stepping); got != c.want {
			t.Errorf("%s %d %#x %d: %v, want %v", c.vendor, c.family, c.model, c.stepping, got, c.want)
		}
	}
}

func TestDiscoverWithoutPMU(t *testing.T) {
	sys := t.TempDir()
	write(t, sys+"/bus/event_source/devices/cpu/type", "4\n")
	if _, err := Discover(sys); !errors.Is(err, ErrNoPMU) {
		t.Errorf("a host with only the core PMU: %v, want ErrNoPMU", err)
	}
	if _, err := Discover(t.TempDir()); !errors.Is(err, ErrNoPMU) {
		t.Errorf("no event_source bus: %v, want ErrNoPMU", err)
	}
}

func TestEncodeErrors(t *testing.T) {
	formats := map[string]Format{}
	var err error
	if formats["umask"], err = ParseFormat("config:8-15"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ terms, want string }{
		{"umask=0x100", "wider than the format's 8 bits"},
		{"ch_mask=1", "no such format"},
	} {
		terms, err := ParseTerms(c.terms)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Encode(1, formats, terms); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.terms, err, c.want)
		}
	}
	for _, bad := range []string{"config:8-", "config2:9-8", "bogus:0-7", "config:0-64", "config", "config:0-7,4-9"} {
		if _, err := ParseFormat(bad); err == nil {
			t.Errorf("ParseFormat(%q) accepted", bad)
		}
	}
	if _, err := ParseTerms("event=0xzz"); err == nil {
		t.Error("ParseTerms accepted event=0xzz")
	}
}

// TestEveryModelResolvesItsEvents: every event the table names is in the
// model's JSON, and the parts of each IIO event differ only in their
// port.
func TestEveryModelResolvesItsEvents(t *testing.T) {
	for _, m := range Models() {
		terms, err := m.Terms()
		if err != nil {
			t.Error(err)
			continue
		}
		want := len(IIOTraffics)
		for _, r := range m.DDIO {
			want += len(slices.DeleteFunc([]string{r.Hit, r.Miss}, func(n string) bool { return n == "" }))
		}
		if len(terms) != want {
			t.Errorf("%s: %d event strings, want %d", m.Name, len(terms), want)
		}
	}
}
