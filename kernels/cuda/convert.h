// Conversions between float32 and the low-precision float types on device memory: the CUDA
// twins of kernels/cpu/convert.h (same rounding, bit for bit: both compile kernels/cpu/codecs.h).
// An optional scale multiplies in float32: widening returns decode(x) * scale, narrowing
// rounds x * scale; scale 1 is exactly the unscaled conversion. Queued on `stream`.
#pragma once

#include <cstddef>

#include "core/common/dtype.h"

namespace weft::kernels::cuda {

// dst[i] = widen(src[i]) * scale; src_type is f16, bf16, f8e4m3, f8e5m2 or f32.
void widen_to_f32(float* dst, const void* src, DType src_type, size_t count, void* stream, float scale = 1.0f);
// dst[i] = round(src[i] * scale) to dst_type (f16, bf16, f8e4m3, f8e5m2 or f32); fp8 saturates.
void narrow_from_f32(void* dst, DType dst_type, const float* src, size_t count, void* stream,
                     float scale = 1.0f);

}  // namespace weft::kernels::cuda
