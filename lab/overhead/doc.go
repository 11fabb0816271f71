// Package overhead measures what a monitor costs the packet path, side by
// side with the same path bare, on a veth lab: frames from one pinned CPU,
// by the fastest method of the traffic generator the kernel allows, into
// a device whose XDP program drops them.
//
// The method (docs/performance.md): every round runs every variant once,
// the order rotated by one each round, and every variant gets the same
// pause after it started and before traffic, so drift on a shared machine
// and the after-effects of a start-up hit all variants alike. A variant's
// figure is the median over rounds of its ratio to the base variant of
// the same round. One variant is a control that does nothing (a sleeping
// process, started and stopped like the others): its ratio is the noise
// floor of the run, and a comparison only counts when the control is
// within 1% of 1.
package overhead
