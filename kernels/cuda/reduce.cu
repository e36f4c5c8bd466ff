// Device element-wise reductions and divide_by: the operators are kernels/cpu/reduce.cpp's,
// written for the device (same selects, same integer widths), so results match bit for bit.
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/float_bits.cuh"
#include "kernels/cuda/reduce.h"

namespace weft::kernels::cuda {
namespace {

using namespace detail;

// Integer arithmetic in an unsigned type (wrap-around is defined); 8-bit values promote to
// unsigned int, as on the CPU.
template <class T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct OpSum {
  template <class T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a + b;
    } else {
      return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
    }
  }
};

struct OpProd {
  template <class T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a * b;
    } else {
      return static_cast<T>(static_cast<WrapT<T>>(a) * static_cast<WrapT<T>>(b));
    }
  }
};

// IEEE 754-2019 minimum/maximum: a NaN operand wins, -0 < +0 (see kernels/cpu/reduce.cpp).
struct OpMin {
  template <class T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = a < b ? a : b;
      const T either_sign = float_of(bits_of(a) | bits_of(b));
      r = a == b ? either_sign : r;
      return a != a ? a : r;
    } else {
      return a < b ? a : b;
    }
  }
};

struct OpMax {
  template <class T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      T r = a > b ? a : b;
      const T both_sign = float_of(bits_of(a) & bits_of(b));
      r = a == b ? both_sign : r;
      return a != a ? a : r;
    } else {
      return a > b ? a : b;
    }
  }
};

// Low-precision floats: widen both operands, reduce in float32, round once.
template <class C, class Op>
struct ViaF32 {
  __device__ typename C::Storage operator()(typename C::Storage a, typename C::Storage b) const {
    return C::narrow(Op{}(C::widen(a), C::widen(b)));
  }
};

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

template <class T>
struct DivideBy {
  int divisor;
  __device__ T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return x / static_cast<T>(divisor);
    } else {
      // As on the CPU: divide in a type holding element and divisor; truncates toward zero.
      using W = std::conditional_t<std::is_signed_v<T>, std::conditional_t<(sizeof(T) <= 4), int32_t, int64_t>,
                                   std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>>;
      return static_cast<T>(static_cast<W>(x) / static_cast<W>(divisor));
    }
  }
};

template <class C>
struct DivideNarrow {
  int divisor;
  __device__ typename C::Storage operator()(typename C::Storage x) const {
    return C::narrow(C::widen(x) / static_cast<float>(divisor));
  }
};

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
