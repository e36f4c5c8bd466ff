// Private to kernels/cuda: what one element of widen_to_f32 / narrow_from_f32 computes (the
// functors convert.cu maps over a buffer). Host and device code (host_device.cuh).
#pragma once

#include "kernels/cuda/float_bits.cuh"

namespace weft::kernels::cuda::detail {

// scale == 1 skips the multiply, so that NaN payloads pass exactly as in the unscaled CPU code.
template <class C>
struct Widen {
  float scale;
  WEFT_HD float operator()(typename C::Storage v) const {
    const float x = C::widen(v);
    return scale == 1.0f ? x : x * scale;
  }
};

template <class C>
struct Narrow {
  float scale;
  WEFT_HD typename C::Storage operator()(float x) const { return C::narrow(scale == 1.0f ? x : x * scale); }
};

}  // namespace weft::kernels::cuda::detail
