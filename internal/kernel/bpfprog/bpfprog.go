// Package bpfprog reads BPF programs and XDP links by id, as bpftool prog
// and bpftool link list them: name, tag, run count and run time, and which
// bpf_link holds a program on a device. It never attaches anything.
package bpfprog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// CheckList fails when the kernel refuses to list programs
// (BPF_PROG_GET_NEXT_ID checks CAP_SYS_ADMIN).
func CheckList() error {
	if _, err := ebpf.ProgramGetNextID(0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("listing BPF programs (BPF_PROG_GET_NEXT_ID): %w", err)
	}
	return nil
}

// EnableStats holds a BPF_ENABLE_STATS fd: the kernel counts run count
// and run time of every program until it is closed.
func EnableStats() (io.Closer, error) {
	fd, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enabling BPF run-time statistics (BPF_ENABLE_STATS): %w", err)
	}
	return fd, nil
}

// StatsEnabled reads kernel.bpf_stats_enabled under the procfs mount
// procRoot.
func StatsEnabled(procRoot string) (bool, error) {
	path := filepath.Join(procRoot, "sys/kernel/bpf_stats_enabled")
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("reading kernel.bpf_stats_enabled: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return false, fmt.Errorf("parsing %s: %w", path, err)
	}
	return v != 0, nil
}

// Program is what the kernel says of a program.
type Program struct {
	Name, Tag string
	RunCount  uint64
	Runtime   time.Duration
}

// Reader reads programs by id, keeping each id's name and tag, which never
// change, between reads.
type Reader struct {
	mu   sync.Mutex
	meta map[ebpf.ProgramID]Program
}

// NewReader returns a reader that knows no program yet.
func NewReader() *Reader { return &Reader{meta: map[ebpf.ProgramID]Program{}} }

// Read returns the program's name, tag and statistics, or nil without
// error when no program has the id any more. A program whose statistics
// cannot be read is returned with its name and tag, and the error.
func (r *Reader) Read(id ebpf.ProgramID) (*Program, error) {
	prog, err := ebpf.NewProgramFromID(id)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening by id (BPF_PROG_GET_FD_BY_ID): %w", err)
	}
	defer prog.Close()

	r.mu.Lock()
	p, ok := r.meta[id]
	r.mu.Unlock()
	if !ok {
		info, err := prog.Info()
		if err != nil {
			return nil, fmt.Errorf("reading program info: %w", err)
		}
		p = Program{Name: info.Name, Tag: info.Tag}
		r.mu.Lock()
		r.meta[id] = p
		r.mu.Unlock()
	}
	stats, err := prog.Stats()
	if err != nil {
		return &p, fmt.Errorf("reading run count and run time: %w", err)
	}
	p.RunCount, p.Runtime = stats.RunCount, stats.Runtime
	return &p, nil
}

// Keep forgets the names and tags of the programs keep lacks.
func (r *Reader) Keep(keep func(ebpf.ProgramID) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.meta {
		if !keep(id) {
			delete(r.meta, id)
		}
	}
}

// LinkKey identifies an XDP bpf_link by what its link info carries: the
// kernel reports the ifindex but not the mode, so a program held by two
// links on one device (two modes) has two ids under one key.
type LinkKey struct {
	Ifindex int
	Prog    ebpf.ProgramID
}

// XDPLinks lists the XDP bpf_links of the system. Each link fd is closed by
// the iterator as it moves on.
func XDPLinks() (map[LinkKey][]link.ID, error) {
	out := map[LinkKey][]link.ID{}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return out, fmt.Errorf("reading bpf_link %d: %w", it.ID, err)
		}
		x := info.XDP()
		if info.Type != link.XDPType || x == nil {
			continue
		}
		k := LinkKey{Ifindex: int(x.Ifindex), Prog: info.Program}
		out[k] = append(out[k], info.ID)
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("listing bpf_links (BPF_LINK_GET_NEXT_ID): %w", err)
	}
	return out, nil
}
