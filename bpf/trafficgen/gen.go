// Package trafficgen holds the live-frame generator's program; the
// generator itself is internal/trafficgen.
package trafficgen

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I.." -target bpfel -go-package trafficgen Trafficgen trafficgen.c
