package xdpmon

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I.." -target bpfel -go-package xdpmon -type dev_key Xdpmon xdpmon.c
