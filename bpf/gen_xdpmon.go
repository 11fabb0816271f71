package bpf

// The xdp collector's tracepoint programs (xdp_monitor as metrics).
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -go-package bpf Xdpmon xdpmon.c
