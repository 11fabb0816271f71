package collector

import (
	"slices"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// TestDisableDefaults: --collector.disable-defaults turns off every
// default collector, and --collector.NAME turns single ones back on, as
// node_exporter's flag does; without it the defaults stand.
func TestDisableDefaults(t *testing.T) {
	var defaults []string
	for _, r := range Registrations() {
		if r.DefaultEnabled {
			defaults = append(defaults, r.Name)
		}
	}
	if !slices.Contains(defaults, "nic") || slices.Contains(defaults, "rxq") {
		t.Fatalf("defaults %q: the cases below assume nic on and rxq off", defaults)
	}
	withoutNIC := slices.DeleteFunc(slices.Clone(defaults), func(n string) bool { return n == "nic" })
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, defaults},
		{[]string{"--no-collector.nic"}, withoutNIC},
		{[]string{"--collector.disable-defaults"}, nil},
		{[]string{"--collector.disable-defaults", "--collector.nic"}, []string{"nic"}},
		{[]string{"--collector.disable-defaults", "--collector.nic", "--collector.rxq"}, []string{"nic", "rxq"}},
		{[]string{"--collector.disable-defaults", "--no-collector.nic", "--collector.cpu"}, []string{"cpu"}},
	} {
		app := kingpin.New("test", "")
		sel := AddFlags(app)
		if _, err := app.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got := sel.Enabled()
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%q enabled %q, want %q", tc.args, got, want)
		}
	}

	// A collector's own flag while disable-defaults turned it off is the
	// same error as with --no-collector.NAME.
	app := kingpin.New("test", "")
	sel := AddFlags(app)
	if _, err := app.Parse([]string{"--collector.disable-defaults", "--collector.napi.softirq"}); err != nil {
		t.Fatal(err)
	}
	if err := sel.Validate(); err == nil {
		t.Error("--collector.napi.softirq accepted with the napi collector turned off by --collector.disable-defaults")
	}
}
