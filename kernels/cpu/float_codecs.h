// The host's float codecs for the kernels whose rows are float32, float16 or bfloat16 (the
// optimizer, the MoE row movements): widen to float32 exactly, narrow with one round to nearest
// even. They round as kernels/cuda's Codec<D> do: both are codecs.h.
#pragma once

#include <cstdint>

#include "core/common/dtype.h"
#include "kernels/cpu/codecs.h"

namespace weft::kernels {

struct HostF32 {
  using Storage = float;
  static float widen(float v) { return v; }
  static float narrow(float x) { return x; }
};
struct HostF16 {
  using Storage = uint16_t;
  static float widen(uint16_t v) { return detail::f16_to_f32_inline(v); }
  static uint16_t narrow(float x) { return detail::f32_to_f16_inline(x); }
};
struct HostBf16 {
  using Storage = uint16_t;
  static float widen(uint16_t v) { return detail::bf16_to_f32_inline(v); }
  static uint16_t narrow(float x) { return detail::f32_to_bf16_inline(x); }
};

// fn(codec) for d, which the caller has checked is f32, f16 or bf16 (anything else is taken as f32).
template <class Fn>
void with_float_codec(DType d, Fn&& fn) {
  switch (d) {
    case DType::bf16: return fn(HostBf16{});
    case DType::f16: return fn(HostF16{});
    default: return fn(HostF32{});
  }
}

}  // namespace weft::kernels
