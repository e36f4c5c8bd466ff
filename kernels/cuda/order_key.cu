// Float <-> order key conversions for MIN/MAX through unsigned integer reductions (order_key.h);
// order_key_ops.cuh says how a key is made.
#include <cstdint>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/order_key.h"
#include "kernels/cuda/order_key_ops.cuh"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

void check_key_args(const void* dst, const void* src, size_t count, DType dtype, const char* what) {
  if (!dtype_is_float(dtype)) {
    fail(Status::invalid_argument, "%s: dtype %s is not a float type", what, dtype_name(dtype));
  }
  if (count != 0 && (!dst || !src)) fail(Status::invalid_argument, "%s: null buffer with count %zu", what, count);
}

}  // namespace

void to_order_key(void* dst, const void* src, DType dtype, size_t count, ReduceOp op, void* stream) {
  check_key_args(dst, src, count, dtype, "cuda::to_order_key");
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
  check_key_args(dst, src, count, dtype, "cuda::from_order_key");
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
