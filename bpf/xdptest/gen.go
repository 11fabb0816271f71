// Package xdptest holds XDP programs that tests attach as a user's own
// programs would be: their observers must count them without touching
// them. The objects are committed like every bpf2go output, so a test can
// also hand sized_bpfel.o to iproute2.
package xdptest

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I.." -target bpfel -go-package xdptest Sized sized.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I.." -target bpfel -go-package xdptest Tailcall tailcall.c
