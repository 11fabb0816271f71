// Command gen renders the kernel matrix's recording into the support
// table of docs/kernels.md: gen RECORDING DOC.
package main

import (
	"fmt"
	"os"

	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/support"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gen RECORDING DOC")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(recording, doc string) error {
	results, err := support.Load(recording)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	out, err := support.Rewrite(string(b), results)
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	return os.WriteFile(doc, []byte(out), 0o644)
}
