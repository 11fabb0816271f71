package mdsection

import (
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	const begin, end = "<!-- b -->\n", "<!-- e -->"
	got, err := Replace("head\n<!-- b -->\nold\n<!-- e -->\ntail\n", begin, end, "new\n")
	if want := "head\n<!-- b -->\nnew\n<!-- e -->\ntail\n"; err != nil || got != want {
		t.Errorf("Replace = %q, %v; want %q", got, err, want)
	}
	// An end marker before the begin marker is not the section's end.
	if _, err := Replace("<!-- e -->\n<!-- b -->\n", begin, end, "x"); err == nil || !strings.Contains(err.Error(), "<!-- b -->") {
		t.Errorf("an end before the begin: err %v", err)
	}
	if _, err := Replace("no markers", begin, end, "x"); err == nil {
		t.Error("a page without the markers: no error")
	}
}
