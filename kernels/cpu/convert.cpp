// float32 <-> float16 / bfloat16, and the bulk widen/narrow entry points for every narrow type.
// The scalar codecs live in codecs.h (shared with kernels/cuda); the bulk loops inline them.
#include "kernels/cpu/convert.h"

#include <cstring>

#include "core/common/status.h"
#include "kernels/cpu/codecs.h"

namespace weft::kernels {

using namespace detail;

namespace {

void check_buffers(const void* dst, const void* src, size_t count, const char* what) {
  if (count != 0 && (dst == nullptr || src == nullptr)) {
    fail(Status::invalid_argument, "%s: null buffer with count %zu", what, count);
  }
}

}  // namespace

uint16_t f32_to_f16(float x) { return f32_to_f16_inline(x); }
float f16_to_f32(uint16_t h) { return f16_to_f32_inline(h); }
uint16_t f32_to_bf16(float x) { return f32_to_bf16_inline(x); }
float bf16_to_f32(uint16_t b) { return bf16_to_f32_inline(b); }

void widen_to_f32(float* dst, const void* src, DType src_type, size_t count) {
  check_buffers(dst, src, count, "widen_to_f32");
  switch (src_type) {
    case DType::f32:
      if (count != 0 && dst != src) std::memmove(dst, src, count * sizeof(float));
      return;
    case DType::f16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = f16_to_f32_inline(s[i]);
      return;
    }
    case DType::bf16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32_inline(s[i]);
      return;
    }
    case DType::f8e4m3: widen_e4m3(dst, static_cast<const uint8_t*>(src), count); return;
    case DType::f8e5m2: widen_e5m2(dst, static_cast<const uint8_t*>(src), count); return;
    default: break;
  }
  fail(Status::invalid_argument, "widen_to_f32: dtype %d is not a float type narrower than f32",
       static_cast<int>(src_type));
}

void narrow_from_f32(void* dst, DType dst_type, const float* src, size_t count) {
  check_buffers(dst, src, count, "narrow_from_f32");
  switch (dst_type) {
    case DType::f32:
      if (count != 0 && dst != src) std::memmove(dst, src, count * sizeof(float));
      return;
    case DType::f16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f32_to_f16_inline(src[i]);
      return;
    }
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < count; ++i) d[i] = f32_to_bf16_inline(src[i]);
      return;
    }
    case DType::f8e4m3: narrow_e4m3_saturate(static_cast<uint8_t*>(dst), src, count); return;
    case DType::f8e5m2: narrow_e5m2_saturate(static_cast<uint8_t*>(dst), src, count); return;
    default: break;
  }
  fail(Status::invalid_argument, "narrow_from_f32: dtype %d is not a float type narrower than f32",
       static_cast<int>(dst_type));
}

}  // namespace weft::kernels
