//go:build ignore

// gen64cpu builds the 64-CPU fixture set (64cpu/), or with -cpus N the
// N-CPU one (Ncpu/), from the files captured on a real 2-CPU host (2cpu/):
// the layout of every line is the kernel's own (fs/proc/stat.c,
// fs/proc/softirqs.c, net/core/net-procfs.c); only the number of CPUs
// grows. CPU n takes the values of captured CPU n%2 plus a per-CPU offset,
// so every CPU differs and a test can predict each value.
//
//	cd collector/testdata/proc && go run gen64cpu.go && go run gen64cpu.go -cpus 128
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

var (
	cpus int
	dir  string
)

func main() {
	flag.IntVar(&cpus, "cpus", 64, "CPUs of the generated set")
	flag.Parse()
	dir = fmt.Sprintf("%dcpu", cpus)
	must(os.MkdirAll(dir+"/net", 0o755))
	must(genStat())
	must(genSoftirqs())
	must(genSoftnet())
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func lines(path string) []string {
	b, err := os.ReadFile(path)
	must(err)
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

func atoi(s string, base int) uint64 {
	v, err := strconv.ParseUint(s, base, 64)
	must(err)
	return v
}

// genStat: cpuN field f (0-based) = captured cpu(N%2) field f + N*(f+1);
// the "cpu" line is the sum over the 64 lines, as the kernel prints it.
func genStat() error {
	in := lines("2cpu/stat")
	base := map[int][]uint64{}
	var rest []string
	for _, l := range in {
		f := strings.Fields(l)
		switch {
		case f[0] == "cpu":
		case strings.HasPrefix(f[0], "cpu"):
			n := int(atoi(f[0][3:], 10))
			for _, s := range f[1:] {
				base[n] = append(base[n], atoi(s, 10))
			}
		default:
			rest = append(rest, l)
		}
	}
	total := make([]uint64, len(base[0]))
	var per []string
	for n := 0; n < cpus; n++ {
		vals := make([]string, len(base[0]))
		for f, b := range base[n%2] {
			v := b + uint64(n*(f+1))
			total[f] += v
			vals[f] = strconv.FormatUint(v, 10)
		}
		per = append(per, fmt.Sprintf("cpu%d %s", n, strings.Join(vals, " ")))
	}
	var tot []string
	for _, v := range total {
		tot = append(tot, strconv.FormatUint(v, 10))
	}
	out := append([]string{"cpu  " + strings.Join(tot, " ")}, per...)
	out = append(out, rest...)
	return os.WriteFile(dir+"/stat", []byte(strings.Join(out, "\n")+"\n"), 0o644)
}

// genSoftirqs: vector row r, CPU n = captured CPU n%2 + n*(r+1).
func genSoftirqs() error {
	in := lines("2cpu/softirqs")
	var b strings.Builder
	b.WriteString("                    ")
	for n := 0; n < cpus; n++ {
		fmt.Fprintf(&b, "CPU%-8d", n)
	}
	b.WriteString("\n")
	for r, l := range in[1:] {
		name, vals, _ := strings.Cut(l, ":")
		f := strings.Fields(vals)
		fmt.Fprintf(&b, "%12s:", strings.TrimSpace(name))
		for n := 0; n < cpus; n++ {
			fmt.Fprintf(&b, " %10d", atoi(f[n%2], 10)+uint64(n*(r+1)))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(dir+"/softirqs", []byte(b.String()), 0o644)
}

// genSoftnet: processed = captured + n*4096, dropped = n, time_squeeze = 2n,
// the CPU index column = n; the other columns as captured.
func genSoftnet() error {
	in := lines("2cpu/net/softnet_stat")
	var b strings.Builder
	for n := 0; n < cpus; n++ {
		f := strings.Fields(in[n%2])
		vals := make([]uint64, len(f))
		for i, s := range f {
			vals[i] = atoi(s, 16)
		}
		vals[0] += uint64(n * 4096)
		vals[1] = uint64(n)
		vals[2] = uint64(2 * n)
		vals[12] = uint64(n)
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%08x", v)
		}
		b.WriteString("\n")
	}
	return os.WriteFile(dir+"/net/softnet_stat", []byte(b.String()), 0o644)
}
