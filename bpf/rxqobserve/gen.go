package rxqobserve

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I.." -target bpfel -go-package rxqobserve -type rec Observer observe.c
