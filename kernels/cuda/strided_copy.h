// Copies between strided n-d views of device memory, and zero fills of one: the CUDA twins of
// kernels/cpu/strided_copy.h (same views, same result: kernels::strided_copy defines it).
// Work is queued on `stream` (a cudaStream_t; NULL is the legacy default stream) and the call
// returns without waiting. Views must address device memory of the current device.
#pragma once

#include "kernels/cpu/strided_copy.h"

namespace weft::kernels::cuda {

// dst[i] = src[i] for every index of the views' common shape: same ndim (0..kMaxViewDims),
// shape and element size (any, 1 byte and up), strides in elements and >= 0, dst and src not
// overlapping. Bytes of dst's memory that are no element of dst are not written.
// How: dims of extent 1 are dropped and the element's bytes become the innermost dim; dims
// contiguous in both views are merged. Both views one contiguous run: one cudaMemcpyAsync.
// Otherwise one kernel moves words of the widest size (16, 8, 4, 2 or 1 bytes) that the
// innermost contiguous run's length, both base addresses and every stride allow: a contiguous
// innermost run (rows of a sliced or padded tensor) goes in 16-byte words, consecutive across
// the threads of a warp; a transposed view goes element by element.
// Throws weft::Error (invalid_argument) for mismatched views, and (transport) when the launch
// fails.
void strided_copy(const StridedView& dst, const StridedView& src, void* stream);

// Every element of dst becomes all-zero bits (zero in every dtype): cudaMemsetAsync when dst is
// one contiguous run, else a kernel storing zero words as strided_copy would store copied ones.
void strided_zero(const StridedView& dst, void* stream);

}  // namespace weft::kernels::cuda
