package perfevent

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// words lays out u64s in host byte order, as the kernel writes read_format.
func words(w ...uint64) []byte {
	b := make([]byte, 8*len(w))
	for i, v := range w {
		binary.NativeEndian.PutUint64(b[8*i:], v)
	}
	return b
}

// capturedSoftwareRead is one read(2) of the software group leader on CPU 1
// of this VM, 200 ms after enabling (little-endian x86-64): nr=5,
// time_enabled = time_running = 200362846 ns, then {value, id} for
// cpu-clock, task-clock, context-switches, cpu-migrations, page-faults.
const capturedSoftwareRead = "0500000000000000" + "5e4bf10b00000000" + "5e4bf10b00000000" +
	"c549f10b00000000" + "1100000000000000" + "f950f10b00000000" + "1200000000000000" +
	"1101000000000000" + "1300000000000000" + "0200000000000000" + "1400000000000000" +
	"e806000000000000" + "1500000000000000"

func TestDecodeGroupRead(t *testing.T) {
	t.Parallel()
	full := uint64(ReadFormat)
	captured, err := hex.DecodeString(capturedSoftwareRead)
	if err != nil {
		t.Fatal(err)
	}
	if binary.NativeEndian.Uint64(words(1)) != binary.LittleEndian.Uint64(words(1)) {
		captured = nil // the capture is little-endian; its case is skipped below
	}
	ok := []struct {
		name   string
		buf    []byte
		format uint64
		want   GroupRead
	}{
		{"hardware pair cycles/instructions, multiplexed to half", words(2, 1_000_000_000, 500_000_000, 2_000_000_000, 7, 3_100_000_000, 8), full,
			GroupRead{1_000_000_000, 500_000_000, []Value{{2_000_000_000, 7}, {3_100_000_000, 8}}}},
		{"six hardware events with PERF_FORMAT_LOST", words(6, 10, 10, 1, 1, 0, 2, 2, 0, 3, 3, 0, 4, 4, 0, 5, 5, 9, 6, 6, 0),
			full | unix.PERF_FORMAT_LOST,
			GroupRead{10, 10, []Value{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}}},
		{"no ids, no times", words(2, 42, 43), unix.PERF_FORMAT_GROUP,
			GroupRead{0, 0, []Value{{42, 0}, {43, 0}}}},
		{"enabled only", words(1, 99, 5), unix.PERF_FORMAT_GROUP | unix.PERF_FORMAT_TOTAL_TIME_ENABLED,
			GroupRead{99, 0, []Value{{5, 0}}}},
		{"captured software group", captured, full,
			GroupRead{200362846, 200362846, []Value{{0x0bf149c5, 17}, {0x0bf150f9, 18}, {273, 19}, {2, 20}, {1768, 21}}}},
	}
	for _, tc := range ok {
		if tc.buf == nil {
			continue
		}
		got, err := DecodeGroupRead(tc.buf, tc.format)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		if n := ReadSize(tc.format, len(tc.want.Values)); n != len(tc.buf) {
			t.Errorf("%s: ReadSize = %d, buffer is %d", tc.name, n, len(tc.buf))
		}
	}

	bad := []struct {
		name   string
		buf    []byte
		format uint64
		errHas string
	}{
		{"empty", nil, full, "empty"},
		{"partial word", words(1, 2, 3, 4, 5)[:39], full, "whole number"},
		{"nr zero", words(0, 1, 1), full, "group of 0"},
		{"nr absurd", words(1 << 40), full, "group of"},
		{"truncated", words(2, 10, 10, 1, 1, 2), full, "want 56"},
		{"trailing data", words(1, 10, 10, 1, 1, 0), full, "want 40"},
		{"running > enabled", words(1, 10, 11, 1, 1), full, "exceeds"},
		{"not a group read", words(1, 10, 10, 1, 1), unix.PERF_FORMAT_TOTAL_TIME_ENABLED, "PERF_FORMAT_GROUP"},
	}
	for _, tc := range bad {
		_, err := DecodeGroupRead(tc.buf, tc.format)
		if err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.errHas)
		}
	}
}

// TestScaler feeds successive reads of a two-event group through the
// multiplexing correction.
func TestScaler(t *testing.T) {
	t.Parallel()
	var s Scaler
	steps := []struct {
		enabled, running, a, b uint64
		want                   []float64
	}{
		{100, 50, 10, 4, []float64{20, 8}},    // ran half the time: x2
		{200, 150, 30, 14, []float64{40, 18}}, // ran all of the interval: +raw
		{300, 175, 35, 14, []float64{60, 18}}, // ran a quarter: +5x4, +0
		{300, 175, 35, 14, []float64{60, 18}}, // nothing happened
	}
	for i, st := range steps {
		got, err := s.Add(GroupRead{st.enabled, st.running, []Value{{st.a, 1}, {st.b, 2}}})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("step %d: got %v, want %v", i, got, st.want)
		}
	}
	if _, err := s.Add(GroupRead{400, 200, []Value{{34, 1}, {20, 2}}}); err == nil {
		t.Error("a count going backwards was accepted")
	}
	if _, err := s.Add(GroupRead{400, 200, []Value{{40, 1}}}); err == nil {
		t.Error("a group changing size was accepted")
	}
}

// encodePerfRead lays r out as read(2) returns it under format, with the
// lost counts zero; the inverse of DecodeGroupRead.
func encodePerfRead(r GroupRead, format uint64) []byte {
	w := []uint64{uint64(len(r.Values))}
	if format&unix.PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
		w = append(w, r.Enabled)
	}
	if format&unix.PERF_FORMAT_TOTAL_TIME_RUNNING != 0 {
		w = append(w, r.Running)
	}
	for _, v := range r.Values {
		w = append(w, v.Value)
		if format&unix.PERF_FORMAT_ID != 0 {
			w = append(w, v.ID)
		}
		if format&unix.PERF_FORMAT_LOST != 0 {
			w = append(w, 0)
		}
	}
	return words(w...)
}

// FuzzPerfGroupRead decodes two successive reads of a group leader under a
// fuzzed read_format and folds them into the multiplexing scaler. A decoded
// read re-encodes to the same read, has the size ReadSize says, and
// never runs longer than it was enabled; the scaled counts are finite,
// non-negative and do not decrease from one read to the next.
func FuzzPerfGroupRead(f *testing.F) {
	full := uint64(ReadFormat)
	captured, err := hex.DecodeString(capturedSoftwareRead)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(captured, captured, full)
	f.Add(words(2, 1_000_000_000, 500_000_000, 2_000_000_000, 7, 3_100_000_000, 8),
		words(2, 2_000_000_000, 600_000_000, 2_500_000_000, 7, 3_200_000_000, 8), full)
	f.Add(words(1, 10, 10, 1, 1, 0), words(1, 20, 15, 5, 1, 3), full|unix.PERF_FORMAT_LOST)
	f.Add(words(2, 42, 43), words(2, 50, 60), uint64(unix.PERF_FORMAT_GROUP))
	f.Fuzz(func(t *testing.T, first, second []byte, format uint64) {
		var s Scaler
		var prev []float64
		for _, buf := range [][]byte{first, second} {
			r, err := DecodeGroupRead(buf, format)
			if err != nil {
				return
			}
			if n := len(r.Values); n < 1 || n > 64 || ReadSize(format, n) != len(buf) {
				t.Fatalf("decoded %d values from %d bytes; ReadSize says %d", n, len(buf), ReadSize(format, n))
			}
			if format&unix.PERF_FORMAT_TOTAL_TIME_ENABLED != 0 && r.Running > r.Enabled {
				t.Fatalf("running %d > enabled %d", r.Running, r.Enabled)
			}
			again, err := DecodeGroupRead(encodePerfRead(r, format), format)
			if err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("%+v re-encoded decodes to %+v, %v", r, again, err)
			}
			scaled, err := s.Add(r)
			if err != nil {
				return
			}
			for i, v := range scaled {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("scaled count %d = %v", i, v)
				}
				if prev != nil && v < prev[i] {
					t.Fatalf("scaled count %d went from %v to %v", i, prev[i], v)
				}
			}
			prev = slices.Clone(scaled)
		}
	})
}
