package uncore

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// kindSpec is one PMU kind as a kernel registers it: its format/ files
// and its named events/.
type kindSpec struct {
	formats map[string]string
	events  map[string]string
}

// The format/ files, as DEFINE_UNCORE_FORMAT_ATTR defines them in
// arch/x86/events/intel/uncore_snbep.c and the *_formats_attr arrays
// give them to each model's PMUs (file name: the macro's second
// argument).
var (
	// skx_uncore_cha_formats_attr.
	skxCHA = map[string]string{
		"event": "config:0-7", "umask": "config:8-15", "edge": "config:18", "tid_en": "config:19",
		"inv": "config:23", "thresh": "config:24-31", "filter_state": "config1:17-26",
		"filter_rem": "config1:32", "filter_loc": "config1:33", "filter_all_op": "config1:35",
		"filter_nm": "config1:36", "filter_not_nm": "config1:37", "filter_opc0": "config1:41-50",
		"filter_opc1": "config1:51-60", "filter_nc": "config1:62", "filter_isoc": "config1:63",
	}
	// skx_uncore_iio_formats_attr.
	skxIIO = map[string]string{
		"event": "config:0-7", "umask": "config:8-15", "edge": "config:18", "inv": "config:23",
		"thresh": "config:24-35", "ch_mask": "config:36-43", "fc_mask": "config:44-46",
	}
	// snr_uncore_cha_formats_attr, which icx_uncore_chabox uses.
	icxCHA = map[string]string{
		"event": "config:0-7", "umask": "config:8-15,32-57", "edge": "config:18", "tid_en": "config:19",
		"inv": "config:23", "thresh": "config:24-31", "filter_tid": "config1:0-9",
	}
	// snr_uncore_iio_formats_attr, which the ICX and SPR IIO boxes use.
	snrIIO = map[string]string{
		"event": "config:0-7", "umask": "config:8-15", "edge": "config:18", "inv": "config:23",
		"thresh": "config:24-35", "ch_mask": "config:36-47", "fc_mask": "config:48-50",
	}
	// spr_uncore_cha_formats_attr since Linux 6.11 (umask_ext5; before,
	// umask_ext4, config:8-15,32-55).
	sprCHA = map[string]string{
		"event": "config:0-7", "umask": "config:8-15,32-63", "tid_en": "config:16", "edge": "config:18",
		"inv": "config:23", "thresh": "config:24-31", "filter_tid": "config1:0-9",
	}
	// skx_uncore_iio_freerunning_formats_attr, shared by ICX and SPR.
	freeRunningFormats = map[string]string{"event": "config:0-7", "umask": "config:8-15"}
)

// freeRunningEvents is a model's *_uncore_iio_freerunning_events: ioclk
// and bw_<dir>_port<n> at umask base+n, each 3.814697266e-6 MiB.
func freeRunningEvents(in, out, ports int) map[string]string {
	ev := map[string]string{"ioclk": "event=0xff,umask=0x10"}
	for dir, base := range map[string]int{"in": in, "out": out} {
		if base == 0 {
			continue
		}
		for p := range ports {
			name := fmt.Sprintf("bw_%s_port%d", dir, p)
			ev[name] = fmt.Sprintf("event=0xff,umask=%#x", base+p)
			ev[name+".scale"] = "3.814697266e-6"
			ev[name+".unit"] = "MiB"
		}
	}
	return ev
}

// modelFixture is a supported model's uncore as its kernel driver
// registers it.
type modelFixture struct {
	model                 *Model
	cha, iio, freeRunning kindSpec
}

var modelFixtures = []modelFixture{
	// skx_uncore_iio_freerunning_events: bw_in_port0-3 at 0x20, bw_out_port0-3 at 0x24.
	{skylakeSP, kindSpec{formats: skxCHA}, kindSpec{formats: skxIIO}, kindSpec{freeRunningFormats, freeRunningEvents(0x20, 0x24, 4)}},
	{cascadeLake, kindSpec{formats: skxCHA}, kindSpec{formats: skxIIO}, kindSpec{freeRunningFormats, freeRunningEvents(0x20, 0x24, 4)}},
	// icx_uncore_iio_freerunning_events: bw_in_port0-7 at 0x20.
	{iceLakeSP, kindSpec{formats: icxCHA}, kindSpec{formats: snrIIO}, kindSpec{freeRunningFormats, freeRunningEvents(0x20, 0, 8)}},
	// spr_uncore_iio_freerunning_events: bw_in_port0-7 at 0x20, bw_out_port0-7 at 0x30;
	// Emerald Rapids is driven as Sapphire Rapids.
	{sapphire, kindSpec{formats: sprCHA}, kindSpec{formats: snrIIO}, kindSpec{freeRunningFormats, freeRunningEvents(0x20, 0x30, 8)}},
	{emeraldRapid, kindSpec{formats: sprCHA}, kindSpec{formats: snrIIO}, kindSpec{freeRunningFormats, freeRunningEvents(0x20, 0x30, 8)}},
}

// The fixture host: two sockets of two CPUs (0-1 on package 0, 2-3 on
// package 1), two CHA boxes and three IIO stacks per socket. Each IIO box
// maps its stack on logical die 0 and 1 to these root buses, as
// skx_iio_mapping_show prints them.
var fixtureRootBuses = [][2]string{{"0000:00", "0000:80"}, {"0000:3a", "0000:ae"}, {"0000:5d", "0000:d7"}}

const (
	fixtureCHABoxes = 2
	typeCHA         = 20 // perf_event_attr.type: the kernel numbers dynamic PMUs from PERF_TYPE_MAX up
	typeIIO         = 30
	typeFreeRunning = 40
)

// writeHost writes the fixture host's CPU topology and, for f, its
// uncore PMUs under sys.
func writeHost(t testing.TB, sys string, f modelFixture) {
	t.Helper()
	for cpu, pkg := range []string{"0", "0", "1", "1"} {
		topo := filepath.Join(sys, "devices", "system", "cpu", "cpu"+strconv.Itoa(cpu), "topology")
		write(t, filepath.Join(topo, "physical_package_id"), pkg+"\n")
		write(t, filepath.Join(topo, "die_id"), "0\n")
	}
	for box := range fixtureCHABoxes {
		writePMU(t, sys, fmt.Sprintf("uncore_cha_%d", box), typeCHA+box, f.cha, nil)
	}
	for box, buses := range fixtureRootBuses {
		writePMU(t, sys, fmt.Sprintf("uncore_iio_%d", box), typeIIO+box, f.iio, map[string]string{"die0": buses[0], "die1": buses[1]})
		writePMU(t, sys, fmt.Sprintf("uncore_iio_free_running_%d", box), typeFreeRunning+box, f.freeRunning, nil)
	}
}

func writePMU(t testing.TB, sys, name string, typ int, k kindSpec, extra map[string]string) {
	dir := filepath.Join(sys, "bus", "event_source", "devices", name)
	write(t, filepath.Join(dir, "type"), strconv.Itoa(typ)+"\n")
	write(t, filepath.Join(dir, "cpumask"), "0,2\n")
	for n, v := range k.formats {
		write(t, filepath.Join(dir, "format", n), v+"\n")
	}
	for n, v := range k.events {
		write(t, filepath.Join(dir, "events", n), v+"\n")
	}
	for n, v := range extra {
		write(t, filepath.Join(dir, n), v+"\n")
	}
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
