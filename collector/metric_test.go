package collector

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestMustInvalidUTF8: an interface name is any bytes but '/', ':' and
// white space; such a label value must not panic the scrape, and two names
// that differ only in bytes that are not UTF-8 stay two label values.
func TestMustInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"eth\xff0": `eth\xff0`, "eth\xfe0": `eth\xfe0`, "\xc3": `\xc3`, "é\xe9": `é\xe9`, "eth0": "eth0",
	} {
		m := scrapeSuccess.Must(1, in)
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		if got := out.GetLabel()[0].GetValue(); got != want {
			t.Errorf("label of %q is %q, want %q", in, got, want)
		}
	}
}
