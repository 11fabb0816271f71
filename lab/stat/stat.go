// Package stat holds the statistics the benchmarks quote: on a shared,
// noisy machine a median over rounds, not a mean.
package stat

import (
	"math"
	"slices"
)

// Median of xs (the mean of the middle two for an even count); NaN for
// none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
