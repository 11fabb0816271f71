package trafficgen

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Method is how the generator hands frames to the kernel.
type Method string

// The methods, fastest first: the order in which the generator tries them.
const (
	// Live is BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (Linux 5.18),
	// the method of xdp-tools' xdp-trafficgen. BPF LSM policies, seccomp
	// profiles and container runtimes may refuse it (EPERM).
	Live Method = "live"
	// Broadcast carries one frame around a veth loop inside a namespace
	// of the generator's own and sends 64 copies of it a lap through a
	// devmap broadcast (BPF_F_BROADCAST, Linux 5.14); see broadcast.go.
	Broadcast Method = "broadcast"
	// Packet is one sendto(2) a frame on an AF_PACKET socket with
	// PACKET_QDISC_BYPASS: every kernel has it, and it is slow (0.43 Mpps
	// on the development machine), enough for counts, not for rates.
	Packet Method = "packet"
)

// Methods lists the methods fastest first.
var Methods = []Method{Live, Broadcast, Packet}

// MethodEnv forces a method (live, broadcast or packet) for every run of
// a process whose Config leaves Method empty. The kernel matrix sets it
// to packet in its guests: under QEMU's emulator a live-frame run fills
// veth's 256-frame ring faster than NAPI drains it on kernels that leave
// NET_RX to ksoftirqd once it is woken (seen on 6.1: 11,456 of 100,000
// frames lost at the ring), while one frame per sendto(2) runs the
// receive before returning.
const MethodEnv = "XDP_EXPORTER_TRAFFICGEN_METHOD"

// ParseMethod validates a method name; "" and "auto" mean the fastest the
// kernel allows, returned as "".
func ParseMethod(s string) (Method, error) {
	if s == "" || s == "auto" {
		return "", nil
	}
	for _, m := range Methods {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown traffic generator method %q (want auto, live, broadcast or packet)", s)
}

// Choice is the method a run uses and why.
type Choice struct {
	Method Method
	Reason string
}

func (c Choice) String() string { return string(c.Method) + ": " + c.Reason }

// Slow says whether the method is too slow for the program under test to
// be the bottleneck: its runs give exact counts but not kernel rates.
func (c Choice) Slow() bool { return c.Method == Packet }

// Choose returns the method runs with Config.Method set to m use: m
// itself ("" leaves it to MethodEnv, then to the fastest the kernel
// allows) if the kernel takes it. A forced method the kernel refuses is
// an error that gives the kernel's answer and the methods that work.
func (g *Generator) Choose(m Method) (Choice, error) {
	why := "asked for"
	if m == "" {
		env, err := ParseMethod(os.Getenv(MethodEnv))
		if err != nil {
			return Choice{}, fmt.Errorf("%s: %w", MethodEnv, err)
		}
		m, why = env, MethodEnv+"="+string(env)
	}
	refused := make(map[Method]error)
	for _, cand := range Methods {
		if m != "" && cand != m {
			continue
		}
		err := g.probe(cand)
		if err == nil {
			if m == "" {
				why = "the fastest method this kernel allows"
				if len(refused) > 0 {
					why = "the fastest method this kernel allows; " + refusals(refused)
				}
			}
			return Choice{Method: cand, Reason: why}, nil
		}
		refused[cand] = err
	}
	if m == "" {
		return Choice{}, fmt.Errorf("the kernel refuses every traffic generator method: %s", refusals(refused))
	}
	var work []string
	for _, cand := range Methods {
		if cand != m && g.probe(cand) == nil {
			work = append(work, string(cand))
		}
	}
	return Choice{}, fmt.Errorf("traffic generator method %s (%s): the kernel refuses it: %w; methods that work here: %s",
		m, why, refused[m], orNone(work))
}

func refusals(refused map[Method]error) string {
	var s []string
	for _, m := range Methods {
		if err, ok := refused[m]; ok {
			s = append(s, fmt.Sprintf("%s refused (%v)", m, err))
		}
	}
	return strings.Join(s, ", ")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// probe asks the kernel whether it takes m, the way a run would use it.
// The probes send nothing: xdp_probe broadcasts into an empty map.
func (g *Generator) probe(m Method) error {
	frame := Frame(nil, nil, nil, nil, 9, MinFrameSize)
	switch m {
	case Live:
		// On the loopback device, which every namespace has.
		_, err := g.objs.XdpProbe.Run(&ebpf.RunOptions{
			Data: frame, Repeat: 1, Flags: bpfFTestXDPLiveFrames,
			Context: xdpMd{DataEnd: uint32(len(frame)), IngressIfindex: 1},
		})
		if err != nil {
			return fmt.Errorf("BPF_PROG_RUN with live frames: %w", err)
		}
		return nil
	case Broadcast:
		ret, err := g.objs.XdpProbe.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			return fmt.Errorf("BPF_PROG_RUN: %w", err)
		}
		if ret != xdpRedirect {
			return errors.New("bpf_redirect_map takes no BPF_F_BROADCAST (Linux 5.14)")
		}
		return nil
	case Packet:
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		return unix.Close(fd)
	}
	return fmt.Errorf("unknown method %q", m)
}

// xdpRedirect is XDP_REDIRECT from enum xdp_action.
const xdpRedirect = 4
