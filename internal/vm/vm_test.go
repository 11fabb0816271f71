package vm

import (
	"context"
	"os"
	"testing"
)

func TestBootScratch(t *testing.T) {
	k, err := Fetch(context.Background(), os.Getenv("SUITE"))
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), Config{Kernel: k, Script: os.Getenv("SCRIPT"), Out: os.Getenv("OUT"), Console: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
}
