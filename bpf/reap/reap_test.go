package reap

import (
	"testing"
	"time"
)

// TestReaperSweep checks the rules of the reaper on a clock the test moves:
// a gone key is deleted only once a previous sweep has seen it, a key the
// exporter cannot check only after idle without counting, a live one never.
func TestReaperSweep(t *testing.T) {
	now := time.Unix(1000, 0)
	r := New[string](time.Minute)
	r.Now = func() time.Time { return now }
	fates := map[string]Fate{"live": Live, "gone": Gone, "foreign": Unknown, "busy": Unknown}
	activity := map[string]uint64{"live": 1, "gone": 1, "foreign": 1, "busy": 1}
	sweep := func() map[string]bool {
		var keys []string
		var acts []uint64
		for k := range fates {
			keys, acts = append(keys, k), append(acts, activity[k])
		}
		stale := r.Sweep(keys, acts, func(k string) Fate { return fates[k] })
		out := map[string]bool{}
		for i, k := range keys {
			if stale[i] {
				out[k] = true
				delete(fates, k)
			}
		}
		return out
	}
	if got := sweep(); len(got) != 0 {
		t.Fatalf("first sweep deletes %v; a gone key must have been seen before", got)
	}
	now = now.Add(30 * time.Second)
	activity["busy"]++
	if got := sweep(); len(got) != 1 || !got["gone"] {
		t.Fatalf("second sweep deletes %v, want only the gone key", got)
	}
	now = now.Add(45 * time.Second) // foreign idle 75 s, busy 45 s
	activity["live"]++
	if got := sweep(); len(got) != 1 || !got["foreign"] {
		t.Fatalf("third sweep deletes %v, want only the foreign key idle for over a minute", got)
	}
	now = now.Add(time.Hour)
	if got := sweep(); len(got) != 1 || !got["busy"] {
		t.Fatalf("an hour later the sweep deletes %v, want the idle foreign key and never the live one", got)
	}
}
