// Element-wise reductions on host memory, following weft.h's "Reduction rules".
//
// The loops are written for the auto-vectoriser: one templated loop per (type, op) over
// __restrict pointers, and ops without branches, so that -O3 turns them into SIMD code on any
// target without intrinsics. __restrict is only truthful when dst does not alias an input, so
// the exact-aliasing cases (dst == a and/or dst == b) get their own loops with one pointer fewer
// instead of giving up vectorisation for everyone.
#include "kernels/cpu/reduce.h"

#include <bit>
#include <cstdint>
#include <type_traits>

#include "core/common/status.h"
#include "kernels/cpu/convert.h"

namespace weft::kernels {

namespace {

// Integer arithmetic is done in an unsigned type so that wrap-around is defined; 8-bit values
// are promoted to unsigned int rather than int, whose overflow would be UB for products.
template <class T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
using BitsT = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

struct OpSum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return a + b;
    } else {
      return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
    }
  }
};

struct OpProd {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return a * b;
    } else {
      return static_cast<T>(static_cast<WrapT<T>>(a) * static_cast<WrapT<T>>(b));
    }
  }
};

// Float min/max follow IEEE 754-2019 minimum/maximum: a NaN operand wins, and -0 < +0. The
// signed-zero rule makes them commutative bit for bit, so the result of a collective does not
// depend on which rank's value came first. Written as selects, which vectorise as blends.
struct OpMin {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      T r = a < b ? a : b;  // b when b is NaN
      // Equal values differ at most in the sign of zero; OR-ing the bits picks -0.
      const T either_sign = std::bit_cast<T>(std::bit_cast<BitsT<T>>(a) | std::bit_cast<BitsT<T>>(b));
      r = a == b ? either_sign : r;
      return a != a ? a : r;
    } else {
      return a < b ? a : b;
    }
  }
};

struct OpMax {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      T r = a > b ? a : b;
      // AND-ing the bits of equal values picks +0 over -0.
      const T both_sign = std::bit_cast<T>(std::bit_cast<BitsT<T>>(a) & std::bit_cast<BitsT<T>>(b));
      r = a == b ? both_sign : r;
      return a != a ? a : r;
    } else {
      return a > b ? a : b;
    }
  }
};

template <class T, class Op>
void loop_distinct(T* __restrict dst, const T* __restrict a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
}

template <class T, class Op>
void loop_dst_is_a(T* __restrict dst, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(dst[i], b[i]);
}

// Operand order is kept (a op dst) so that every path returns the same NaN payload.
template <class T, class Op>
void loop_dst_is_b(T* __restrict dst, const T* __restrict a, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], dst[i]);
}

template <class T, class Op>
void loop_all_same(T* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(dst[i], dst[i]);
}

template <class T, class Op>
void reduce_loop(T* dst, const T* a, const T* b, size_t n) {
  if (dst == a && dst == b) {
    loop_all_same<T, Op>(dst, n);
  } else if (dst == a) {
    loop_dst_is_a<T, Op>(dst, b, n);
  } else if (dst == b) {
    loop_dst_is_b<T, Op>(dst, a, n);
  } else {
    loop_distinct<T, Op>(dst, a, b, n);
  }
}

template <class Op>
void reduce_native(DType dtype, void* dst, const void* a, const void* b, size_t n) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    reduce_loop<T, Op>(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n);
  };
  switch (dtype) {
    case DType::f64: return run(double{});
    case DType::f32: return run(float{});
    case DType::i8: return run(int8_t{});
    case DType::u8: return run(uint8_t{});
    case DType::i32: return run(int32_t{});
    case DType::u32: return run(uint32_t{});
    case DType::i64: return run(int64_t{});
    case DType::u64: return run(uint64_t{});
    default: break;
  }
  fail(Status::internal, "reduce_native: dtype %d reached the native path", static_cast<int>(dtype));
}

// Blocks small enough for L1, large enough that the per-block calls do not matter.
constexpr size_t kBlock = 1024;

// Low-precision floats: widen a block of each operand, reduce in float32, round once. Reading
// a whole block before writing it keeps the exact-aliasing cases correct.
template <class Op>
void reduce_via_f32(DType dtype, void* dst, const void* a, const void* b, size_t n) {
  const size_t esize = dtype_size(dtype);
  float fa[kBlock];
  float fb[kBlock];
  for (size_t off = 0; off < n; off += kBlock) {
    const size_t len = n - off < kBlock ? n - off : kBlock;
    widen_to_f32(fa, static_cast<const char*>(a) + off * esize, dtype, len);
    widen_to_f32(fb, static_cast<const char*>(b) + off * esize, dtype, len);
    loop_dst_is_a<float, Op>(fa, fb, len);
    narrow_from_f32(static_cast<char*>(dst) + off * esize, dtype, fa, len);
  }
}

template <class Op>
void reduce_op(DType dtype, void* dst, const void* a, const void* b, size_t n) {
  if (dtype_reduces_in_f32(dtype)) {
    reduce_via_f32<Op>(dtype, dst, a, b, n);
  } else {
    reduce_native<Op>(dtype, dst, a, b, n);
  }
}

template <class T>
void divide_loop(T* __restrict buf, size_t n, int divisor) {
  if constexpr (std::is_floating_point_v<T>) {
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) buf[i] = buf[i] / d;
  } else {
    // Divide in a type that holds both the element and the divisor (a u8 buffer may be divided
    // by 300); divisor >= 1 so the quotient always fits back into T. C++ '/' truncates toward
    // zero, as weft.h's AVG rule asks.
    using W = std::conditional_t<std::is_signed_v<T>, std::conditional_t<(sizeof(T) <= 4), int32_t, int64_t>,
                                 std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>>;
    const W d = static_cast<W>(divisor);
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(static_cast<W>(buf[i]) / d);
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  if (!dtype_valid(static_cast<int>(dtype))) {
    fail(Status::invalid_argument, "reduce: invalid dtype %d", static_cast<int>(dtype));
  }
  if (!op_valid(static_cast<int>(op)) || op == ReduceOp::avg) {
    fail(Status::invalid_argument, "reduce: op %d is not sum, prod, min or max (avg is sum then divide_by)",
         static_cast<int>(op));
  }
  if (count == 0) return;
  if (dst == nullptr || a == nullptr || b == nullptr) {
    fail(Status::invalid_argument, "reduce: null buffer with count %zu", count);
  }
  switch (op) {
    case ReduceOp::sum: return reduce_op<OpSum>(dtype, dst, a, b, count);
    case ReduceOp::prod: return reduce_op<OpProd>(dtype, dst, a, b, count);
    case ReduceOp::min: return reduce_op<OpMin>(dtype, dst, a, b, count);
    case ReduceOp::max: return reduce_op<OpMax>(dtype, dst, a, b, count);
    case ReduceOp::avg: break;
  }
}

void divide_by(void* buf, size_t count, DType dtype, int n) {
  if (!dtype_valid(static_cast<int>(dtype))) {
    fail(Status::invalid_argument, "divide_by: invalid dtype %d", static_cast<int>(dtype));
  }
  // n is a rank count; anything below 1 is a caller bug (and 0 or -1 would be UB for ints).
  if (n < 1) fail(Status::invalid_argument, "divide_by: divisor %d is not positive", n);
  if (count == 0) return;
  if (buf == nullptr) fail(Status::invalid_argument, "divide_by: null buffer with count %zu", count);
  switch (dtype) {
    case DType::f64: return divide_loop(static_cast<double*>(buf), count, n);
    case DType::f32: return divide_loop(static_cast<float*>(buf), count, n);
    case DType::i8: return divide_loop(static_cast<int8_t*>(buf), count, n);
    case DType::u8: return divide_loop(static_cast<uint8_t*>(buf), count, n);
    case DType::i32: return divide_loop(static_cast<int32_t*>(buf), count, n);
    case DType::u32: return divide_loop(static_cast<uint32_t*>(buf), count, n);
    case DType::i64: return divide_loop(static_cast<int64_t*>(buf), count, n);
    case DType::u64: return divide_loop(static_cast<uint64_t*>(buf), count, n);
    case DType::f16: case DType::bf16: case DType::f8e4m3: case DType::f8e5m2: {
      const size_t esize = dtype_size(dtype);
      float f[kBlock];
      for (size_t off = 0; off < count; off += kBlock) {
        const size_t len = count - off < kBlock ? count - off : kBlock;
        char* p = static_cast<char*>(buf) + off * esize;
        widen_to_f32(f, p, dtype, len);
        divide_loop(f, len, n);
        narrow_from_f32(p, dtype, f, len);
      }
      return;
    }
  }
}

}  // namespace weft::kernels
