package bpf

// The drop collector's program (skb:kfree_skb by device and reason).
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -go-package bpf Drop drop.c
