// Float <-> order key conversions for MIN/MAX through unsigned integer reductions (order_key.h).
//
// For sign-magnitude bits b, key = b ^ (sign ? all ones : sign bit) orders
//   -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN
// as unsigned integers. NaNs are first replaced by the all-ones pattern with the sign the op
// needs (negative for MIN: key 0; positive for MAX: key all ones), so they win every
// comparison; the inverse of those keys is a NaN again.
#include <cstdint>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/float_bits.cuh"
#include "kernels/cuda/order_key.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

template <class U>
__device__ U key_of_bits(U b) {
  constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
  return (b & kSign) ? static_cast<U>(~b) : static_cast<U>(b | kSign);
}

template <class U>
__device__ U bits_of_key(U k) {
  constexpr U kSign = U{1} << (sizeof(U) * 8 - 1);
  return (k & kSign) ? static_cast<U>(k & ~kSign) : static_cast<U>(~k);
}

// for_max: NaN becomes +NaN with all payload bits set (largest key), else -NaN (key 0).
template <class F, class U>
__device__ U key_of(F x, bool for_max) {
  if (x != x) return for_max ? ~U{0} : U{0};
  return key_of_bits<U>(bits_of(x));
}

template <class C>
struct ToKey32 {
  bool for_max;
  __device__ uint32_t operator()(typename C::Storage v) const { return key_of<float, uint32_t>(C::widen(v), for_max); }
};

struct ToKey64 {
  bool for_max;
  __device__ uint64_t operator()(double x) const { return key_of<double, uint64_t>(x, for_max); }
};

template <class C>
struct FromKey32 {
  // The value is one of the inputs (or NaN), so narrowing is exact.
  __device__ typename C::Storage operator()(uint32_t k) const { return C::narrow(float_of(bits_of_key(k))); }
};

struct FromKey64 {
  __device__ double operator()(uint64_t k) const { return float_of(bits_of_key(k)); }
};

void check(const void* dst, const void* src, size_t count, DType dtype, const char* what) {
  if (!dtype_is_float(dtype)) {
    fail(Status::invalid_argument, "%s: dtype %s is not a float type", what, dtype_name(dtype));
  }
  if (count != 0 && (!dst || !src)) fail(Status::invalid_argument, "%s: null buffer with count %zu", what, count);
}

}  // namespace

void to_order_key(void* dst, const void* src, DType dtype, size_t count, ReduceOp op, void* stream) {
  check(dst, src, count, dtype, "cuda::to_order_key");
  if (op != ReduceOp::min && op != ReduceOp::max) {
    fail(Status::invalid_argument, "cuda::to_order_key: op %s is not min or max", op_name(op));
  }
  const bool for_max = op == ReduceOp::max;
  if (dtype == DType::f64) {
    map1(static_cast<uint64_t*>(dst), static_cast<const double*>(src), count, ToKey64{for_max}, stream,
         "to_order_key");
    return;
  }
  with_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    map1(static_cast<uint32_t*>(dst), static_cast<const typename C::Storage*>(src), count, ToKey32<C>{for_max},
         stream, "to_order_key");
  });
}

void from_order_key(void* dst, DType dtype, const void* src, size_t count, void* stream) {
  check(dst, src, count, dtype, "cuda::from_order_key");
  if (dtype == DType::f64) {
    map1(static_cast<double*>(dst), static_cast<const uint64_t*>(src), count, FromKey64{}, stream, "from_order_key");
    return;
  }
  with_codec(dtype, [&](auto codec) {
    using C = decltype(codec);
    map1(static_cast<typename C::Storage*>(dst), static_cast<const uint32_t*>(src), count, FromKey32<C>{}, stream,
         "from_order_key");
  });
}

}  // namespace weft::kernels::cuda
