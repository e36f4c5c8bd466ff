// Device element-wise reductions and divide_by: the dtype dispatch; the operators are in
// reduce_ops.cuh.
#include <cstdint>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/reduce_ops.cuh"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

template <class Op>
void reduce_op(void* dst, const void* a, const void* b, size_t n, DType dtype, void* stream) {
  auto native = [&](auto tag) {
    using T = decltype(tag);
    map2(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n, Op{}, stream, "reduce");
  };
  auto low = [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    map2(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n, ViaF32<C, Op>{}, stream,
         "reduce");
  };
  switch (dtype) {
    case DType::f64: return native(double{});
    case DType::f32: return native(float{});
    case DType::i8: return native(int8_t{});
    case DType::u8: return native(uint8_t{});
    case DType::i32: return native(int32_t{});
    case DType::u32: return native(uint32_t{});
    case DType::i64: return native(int64_t{});
    case DType::u64: return native(uint64_t{});
    case DType::f16: return low(Codec<DType::f16>{});
    case DType::bf16: return low(Codec<DType::bf16>{});
    case DType::f8e4m3: return low(Codec<DType::f8e4m3>{});
    case DType::f8e5m2: return low(Codec<DType::f8e5m2>{});
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op, void* stream) {
  if (!dtype_valid(static_cast<int>(dtype))) {
    fail(Status::invalid_argument, "cuda::reduce: invalid dtype %d", static_cast<int>(dtype));
  }
  if (!op_valid(static_cast<int>(op)) || op == ReduceOp::avg) {
    fail(Status::invalid_argument, "cuda::reduce: op %d is not sum, prod, min or max (avg is sum then divide_by)",
         static_cast<int>(op));
  }
  if (count == 0) return;
  if (!dst || !a || !b) fail(Status::invalid_argument, "cuda::reduce: null buffer with count %zu", count);
  switch (op) {
    case ReduceOp::sum: return reduce_op<OpSum>(dst, a, b, count, dtype, stream);
    case ReduceOp::prod: return reduce_op<OpProd>(dst, a, b, count, dtype, stream);
    case ReduceOp::min: return reduce_op<OpMin>(dst, a, b, count, dtype, stream);
    case ReduceOp::max: return reduce_op<OpMax>(dst, a, b, count, dtype, stream);
    case ReduceOp::avg: break;
  }
}

void divide_by(void* buf, size_t count, DType dtype, int n, void* stream) {
  if (!dtype_valid(static_cast<int>(dtype))) {
    fail(Status::invalid_argument, "cuda::divide_by: invalid dtype %d", static_cast<int>(dtype));
  }
  if (n < 1) fail(Status::invalid_argument, "cuda::divide_by: divisor %d is not positive", n);
  if (count == 0) return;
  if (!buf) fail(Status::invalid_argument, "cuda::divide_by: null buffer with count %zu", count);
  auto native = [&](auto tag) {
    using T = decltype(tag);
    map1(static_cast<T*>(buf), static_cast<const T*>(buf), count, DivideBy<T>{n}, stream, "divide_by");
  };
  auto low = [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    map1(static_cast<S*>(buf), static_cast<const S*>(buf), count, DivideNarrow<C>{n}, stream, "divide_by");
  };
  switch (dtype) {
    case DType::f64: return native(double{});
    case DType::f32: return native(float{});
    case DType::i8: return native(int8_t{});
    case DType::u8: return native(uint8_t{});
    case DType::i32: return native(int32_t{});
    case DType::u32: return native(uint32_t{});
    case DType::i64: return native(int64_t{});
    case DType::u64: return native(uint64_t{});
    case DType::f16: return low(Codec<DType::f16>{});
    case DType::bf16: return low(Codec<DType::bf16>{});
    case DType::f8e4m3: return low(Codec<DType::f8e4m3>{});
    case DType::f8e5m2: return low(Codec<DType::f8e5m2>{});
  }
}

}  // namespace weft::kernels::cuda
