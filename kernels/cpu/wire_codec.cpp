#include "kernels/cpu/wire_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/convert.h"

namespace weft::kernels {

namespace {

constexpr float kE4m3Max = 448.0f;

size_t fp8_blocks(size_t count) { return (count + kFp8Block - 1) / kFp8Block; }

// The block's scale: absmax / 448, NaN when the block holds an inf or a NaN.
float block_scale(const float* x, size_t n) {
  float absmax = 0.0f;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    finite &= a <= std::numeric_limits<float>::max();  // false for inf and NaN
    absmax = a > absmax ? a : absmax;
  }
  return finite ? absmax / kE4m3Max : std::numeric_limits<float>::quiet_NaN();
}

template <bool Add>
void decode(WireFormat wire, const void* src, size_t count, float* out) {
  if (wire == WireFormat::native) {
    const float* s = static_cast<const float*>(src);
    for (size_t i = 0; i < count; ++i) out[i] = Add ? out[i] + s[i] : s[i];
    return;
  }
  if (wire == WireFormat::bf16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < count; ++i) {
      const float v = bf16_to_f32(s[i]);
      out[i] = Add ? out[i] + v : v;
    }
    return;
  }
  const size_t nblocks = fp8_blocks(count);
  float scales[1];  // read through memcpy: the scales need not be 4-byte aligned in a chunk
  const unsigned char* bytes = static_cast<const unsigned char*>(src);
  const uint8_t* q = bytes + nblocks * sizeof(float);
  for (size_t b = 0; b < nblocks; ++b) {
    std::memcpy(scales, bytes + b * sizeof(float), sizeof(float));
    const float scale = scales[0];
    const size_t end = b * kFp8Block + kFp8Block < count ? b * kFp8Block + kFp8Block : count;
    for (size_t i = b * kFp8Block; i < end; ++i) {
      const float v = e4m3_to_f32(q[i]) * scale;
      out[i] = Add ? out[i] + v : v;
    }
  }
}

}  // namespace

size_t wire_bytes(WireFormat wire, size_t count) {
  switch (wire) {
    case WireFormat::bf16: return count * 2;
    case WireFormat::fp8_e4m3: return count + fp8_blocks(count) * sizeof(float);
    case WireFormat::native: break;
  }
  return count * sizeof(float);
}

void wire_encode(WireFormat wire, const float* src, size_t count, void* dst) {
  if (wire == WireFormat::native) {
    if (count) std::memcpy(dst, src, count * sizeof(float));
    return;
  }
  if (wire == WireFormat::bf16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < count; ++i) d[i] = f32_to_bf16(src[i]);
    return;
  }
  const size_t nblocks = fp8_blocks(count);
  unsigned char* bytes = static_cast<unsigned char*>(dst);
  uint8_t* q = bytes + nblocks * sizeof(float);
  for (size_t b = 0; b < nblocks; ++b) {
    const size_t begin = b * kFp8Block;
    const size_t n = begin + kFp8Block < count ? kFp8Block : count - begin;
    const float scale = block_scale(src + begin, n);
    std::memcpy(bytes + b * sizeof(float), &scale, sizeof(float));
    // x / scale is within +-448 up to rounding (saturated); scale 0 means an all-zero block.
    for (size_t i = begin; i < begin + n; ++i) q[i] = f32_to_e4m3(scale > 0.0f ? src[i] / scale : src[i] * 0.0f, true);
  }
}

void wire_decode(WireFormat wire, const void* src, size_t count, float* dst) { decode<false>(wire, src, count, dst); }

void wire_decode_add(WireFormat wire, const void* src, size_t count, float* acc) { decode<true>(wire, src, count, acc); }

}  // namespace weft::kernels
