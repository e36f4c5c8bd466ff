// go_schedule (README.md): a SCHEDULE plugin in Go, built with -buildmode=c-shared. The
// manifest comes from the generated C file that CMake copies beside this one (cgo compiles it
// into the library); weft/plugin.h is found through CGO_CFLAGS.
package main

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import "unsafe"

// weft_action_kind_t's numbers (weft/pipeline.h).
const (
	actionF = 0
	actionB = 1
)

// weft's status numbers used as return values (weft/common.h).
const (
	errInvalidArgument = 1
	errUnsupported     = 2
)

// warmup is eager_1f1b's rule: rank r runs min(p - r + 1, m) forwards before its first
// backward, two more than 1F1B's p - 1 - r. The extra forwards are run while 1F1B would sit
// waiting for the first gradient, so more activations are held (p - r + 2 at most).
func warmup(p, r, m int) int {
	w := p - r + 1
	if w > m {
		w = m
	}
	return w
}

// lists writes rank r's order: w forwards, then a forward and a backward in turn, then the
// backwards left; stage r on rank r.
func lists(p, m int) [][][3]int32 {
	out := make([][][3]int32, p)
	for r := 0; r < p; r++ {
		w := warmup(p, r, m)
		l := make([][3]int32, 0, 2*m)
		for i := 0; i < w; i++ {
			l = append(l, [3]int32{actionF, int32(r), int32(i)})
		}
		for i := 0; i < m-w; i++ {
			l = append(l, [3]int32{actionF, int32(r), int32(w + i)})
			l = append(l, [3]int32{actionB, int32(r), int32(i)})
		}
		for i := m - w; i < m; i++ {
			l = append(l, [3]int32{actionB, int32(r), int32(i)})
		}
		out[r] = l
	}
	return out
}

// go_schedule_eager_1f1b is the SCHEDULE entry (weft_plugin_schedule_fn). v must be 1. A Go
// panic must not cross into weft's C frames: it is recovered and reported as a failure.
//
//export go_schedule_eager_1f1b
func go_schedule_eager_1f1b(ranks, microbatches, stagesPerRank C.int32_t, actions unsafe.Pointer,
	capacity C.size_t, counts *C.size_t, stageRank *C.int32_t) (ret C.int32_t) {
	defer func() {
		if recover() != nil {
			ret = errInvalidArgument
		}
	}()
	p, m := int(ranks), int(microbatches)
	if stagesPerRank != 1 {
		return errUnsupported
	}
	if p < 1 || m < 1 || actions == nil || counts == nil || stageRank == nil {
		return errInvalidArgument
	}
	if uint64(capacity) < uint64(2*p*m) {
		return errInvalidArgument
	}
	buf := unsafe.Slice((*int32)(actions), 3*int(capacity))
	cnt := unsafe.Slice(counts, p)
	sr := unsafe.Slice(stageRank, p)
	at := 0
	for r, l := range lists(p, m) {
		sr[r] = C.int32_t(r)
		cnt[r] = C.size_t(len(l))
		for _, a := range l {
			buf[3*at], buf[3*at+1], buf[3*at+2] = a[0], a[1], a[2]
			at++
		}
	}
	return 0
}

// go_schedule_warmup is the FUNCTION warmup(I32 p, I32 r, I32 m) -> I32.
//
//export go_schedule_warmup
func go_schedule_warmup(p, r, m C.int32_t) C.int32_t {
	if p < 1 || r < 0 || r >= p || m < 1 {
		return -1
	}
	return C.int32_t(warmup(int(p), int(r), int(m)))
}

// go_schedule_peak_activations is the FUNCTION peak_activations(I32 p, I32 r, I32 m) -> I32:
// the warm-up's forwards plus the first steady-state forward, at most m.
//
//export go_schedule_peak_activations
func go_schedule_peak_activations(p, r, m C.int32_t) C.int32_t {
	w := go_schedule_warmup(p, r, m)
	if w < 0 {
		return -1
	}
	if w < m {
		return w + 1
	}
	return m
}

func main() {}
