// float32 <-> float16 / bfloat16, and the bulk widen/narrow entry points for every narrow type.
// Every conversion returns quiet NaNs, so a NaN never turns into a signalling one on the way
// through a collective (a signalling NaN could trap in code that enables FP exceptions).
#include "kernels/cpu/convert.h"

#include <cstring>

#include "core/common/status.h"
#include "kernels/cpu/minifloat.h"

namespace weft::kernels {

using namespace detail;

namespace {

constexpr uint16_t kF16InfBits = 0x7c00;
constexpr uint16_t kF16QuietBit = 0x0200;
constexpr uint16_t kBf16QuietBit = 0x0040;

// The exported scalar functions are these same inline bodies; the bulk loops inline them and
// vectorise, which is why they are written as selects rather than early returns.
inline float f16_to_f32_inline(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7fffu;
  const uint32_t normal = (mag << 13) + (static_cast<uint32_t>(127 - 15) << 23);
  // Subnormal: mantissa times 2^-24, exact in float (and never a float subnormal).
  const uint32_t subnormal = f32_bits(static_cast<float>(static_cast<int32_t>(mag)) * 0x1p-24f);
  // Inf/NaN: the f16 payload lands in the top of the f32 mantissa, as hardware converters do.
  const uint32_t special = (mag << 13) | kF32InfBits | (mag > kF16InfBits ? kF32QuietBit : 0u);
  const uint32_t other = mag >= kF16InfBits ? special : normal;
  // AND/OR rather than a select: GCC sinks the multiply into a select's arm and then refuses
  // to if-convert it, which would leave the bulk loop scalar.
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(mag < 0x0400u);
  const uint32_t bits = (subnormal & is_subnormal) | (other & ~is_subnormal);
  return f32_from_bits(sign | bits);
}

inline uint16_t f32_to_f16_inline(float x) {
  const uint32_t bits = f32_bits(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = bits & kF32AbsMask;
  // Infinity rounds past the top as well, so one clamp covers inf and overflow.
  // Codes and |x| stay below 2^31, so signed compares (cheaper in SSE2) give the same answers.
  int32_t code = static_cast<int32_t>(round_magnitude<5, 10>(a));
  code = code >= kF16InfBits ? kF16InfBits : code;
  // Keep the NaN payload's top bits so distinct NaNs stay distinguishable where they fit.
  const int32_t nan = static_cast<int32_t>(kF16InfBits | kF16QuietBit | ((a >> 13) & 0x3ffu));
  code = static_cast<int32_t>(a) > static_cast<int32_t>(kF32InfBits) ? nan : code;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(code));
}

inline float bf16_to_f32_inline(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  if ((bits & kF32AbsMask) > kF32InfBits) bits |= kF32QuietBit;
  return f32_from_bits(bits);
}

inline uint16_t f32_to_bf16_inline(float x) {
  const uint32_t bits = f32_bits(x);
  if ((bits & kF32AbsMask) > kF32InfBits) {
    // Truncation keeps the NaN's exponent; the quiet bit keeps it from becoming inf.
    return static_cast<uint16_t>((bits >> 16) | kBf16QuietBit);
  }
  // bfloat16 shares float32's exponent, so RNE on the low half is the whole conversion; a
  // carry into the exponent (including up to inf) is the correctly rounded result.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

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
