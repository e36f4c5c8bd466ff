// Private to kernels/cuda: what one element of reduce / divide_by computes (the functors
// reduce.cu maps over buffers). The operators are kernels/cpu/reduce.cpp's, written for the
// device (same selects, same integer widths), so results match bit for bit. Host and device
// code (host_device.cuh).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/float_bits.cuh"

namespace weft::kernels::cuda::detail {

// Integer arithmetic in an unsigned type (wrap-around is defined); 8-bit values promote to
// unsigned int, as on the CPU.
template <class T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct OpSum {
  template <class T>
  WEFT_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a + b;
    } else {
      return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
    }
  }
};

struct OpProd {
  template <class T>
  WEFT_HD T operator()(T a, T b) const {
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
  WEFT_HD T operator()(T a, T b) const {
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
  WEFT_HD T operator()(T a, T b) const {
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
  WEFT_HD typename C::Storage operator()(typename C::Storage a, typename C::Storage b) const {
    return C::narrow(Op{}(C::widen(a), C::widen(b)));
  }
};

template <class T>
struct DivideBy {
  int divisor;
  WEFT_HD T operator()(T x) const {
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
  WEFT_HD typename C::Storage operator()(typename C::Storage x) const {
    return C::narrow(C::widen(x) / static_cast<float>(divisor));
  }
};

}  // namespace weft::kernels::cuda::detail
