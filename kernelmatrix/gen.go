// Package kernelmatrix boots Debian's kernels in QEMU and runs the
// exporter and the kernel-facing tests on each (matrix_test.go); its
// recording of what each kernel supports renders docs/kernels.md's table.
package kernelmatrix

//go:generate go run ./internal/support/gen testdata/support.json ../docs/kernels.md
