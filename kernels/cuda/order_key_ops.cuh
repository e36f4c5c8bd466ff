// Private to kernels/cuda: what one element of to_order_key / from_order_key computes (the
// functors order_key.cu maps over a buffer). Host and device code (host_device.cuh).
//
// For sign-magnitude bits b, key = b ^ (sign ? all ones : sign bit) orders
//   -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN
// as unsigned integers. NaNs are first replaced by the all-ones pattern with the sign the op
// needs (negative for MIN: key 0; positive for MAX: key all ones), so they win every
// comparison; the inverse of those keys is a NaN again.
#pragma once

#include <cstdint>

#include "kernels/cuda/float_bits.cuh"

namespace weft::kernels::cuda::detail {

template <class U>
WEFT_HD U key_of_bits(U b) {
  constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
  return (b & kSign) ? static_cast<U>(~b) : static_cast<U>(b | kSign);
}

template <class U>
WEFT_HD U bits_of_key(U k) {
  constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
  return (k & kSign) ? static_cast<U>(k & ~kSign) : static_cast<U>(~k);
}

// for_max: NaN becomes +NaN with all payload bits set (largest key), else -NaN (key 0).
template <class F, class U>
WEFT_HD U key_of(F x, bool for_max) {
  if (x != x) return for_max ? ~U{0} : U{0};
  return key_of_bits<U>(bits_of(x));
}

template <class C>
struct ToKey32 {
  bool for_max;
  WEFT_HD uint32_t operator()(typename C::Storage v) const { return key_of<float, uint32_t>(C::widen(v), for_max); }
};

struct ToKey64 {
  bool for_max;
  WEFT_HD uint64_t operator()(double x) const { return key_of<double, uint64_t>(x, for_max); }
};

template <class C>
struct FromKey32 {
  // The value is one of the inputs (or NaN), so narrowing is exact.
  WEFT_HD typename C::Storage operator()(uint32_t k) const { return C::narrow(float_of(bits_of_key(k))); }
};

struct FromKey64 {
  WEFT_HD double operator()(uint64_t k) const { return float_of(bits_of_key(k)); }
};

}  // namespace weft::kernels::cuda::detail
