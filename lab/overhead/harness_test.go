package overhead

import (
	"context"
	"slices"
	"testing"
)

// TestRoundRotates checks the method itself, without a lab: every round
// runs every variant once, the order rotates by one per round, every
// variant is stopped before the next starts, and the ratios are to
// variant 0 of the same round.
func TestRoundRotates(t *testing.T) {
	var order []string
	running := ""
	variant := func(name string) Variant {
		return Variant{Name: name, Start: func() (func() error, error) {
			if running != "" {
				t.Fatalf("%s started while %s still runs", name, running)
			}
			running = name
			order = append(order, name)
			return func() error { running = ""; return nil }, nil
		}}
	}
	figure := map[string]float64{"base": 4, "half": 2, "same": 4}
	res := New([]Variant{variant("base"), variant("half"), variant("same")})
	cfg := Config{Measure: func(*Rig, Config) (float64, error) { return figure[running], nil }}
	for round := 0; round < 3; round++ {
		if err := res.Round(context.Background(), nil, cfg, round); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"base", "half", "same", "half", "same", "base", "same", "base", "half"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	for i, ratio := range []float64{1, 0.5, 1} {
		if fig, q := res.Median(i); q != ratio || fig != figure[res.Names[i]] {
			t.Errorf("%s: median figure %v ratio %v, want %v and %v", res.Names[i], fig, q, figure[res.Names[i]], ratio)
		}
	}
}
