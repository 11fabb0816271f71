package support

import (
	"path/filepath"
	"reflect"
	"testing"
)

// TestSaveLoad records into a directory that does not exist yet, as the
// first matrix run of a checkout does, and reads the same back.
func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "support.json")
	want := map[string]Support{"bookworm": {Kernel: "6.1.0-50-amd64", Collectors: map[string]string{"ethtool": "works"},
		Tracepoints: map[string]bool{"xdp xdp:xdp_exception": true}, Commands: map[string]string{"ethtool qstats-get": "needs Linux 6.9"}}}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded %+v, saved %+v", got, want)
	}
}
