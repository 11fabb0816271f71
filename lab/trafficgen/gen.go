package trafficgen

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I../../bpf" -target bpfel -go-package trafficgen trafficgen trafficgen.c
