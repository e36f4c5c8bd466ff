// Private to kernels/cuda: the element types of each DType on the device, the float32 codec of
// each narrow type (kernels/cpu/codecs.h, compiled for the device), and bit access to floats.
// Host and device functions (host_device.cuh): the emulated build runs them on the host, where
// the software codecs below stand in for the conversion instructions.
#pragma once

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include <bit>
#include <cstdint>

#include "core/common/dtype.h"
#include "kernels/cpu/codecs.h"
#include "kernels/cuda/host_device.cuh"

namespace weft::kernels::cuda::detail {

#if defined(__CUDA_ARCH__)
__device__ inline uint32_t bits_of(float x) { return __float_as_uint(x); }
__device__ inline uint64_t bits_of(double x) { return static_cast<uint64_t>(__double_as_longlong(x)); }
__device__ inline float float_of(uint32_t u) { return __uint_as_float(u); }
__device__ inline double float_of(uint64_t u) { return __longlong_as_double(static_cast<long long>(u)); }
#else
inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
inline uint64_t bits_of(double x) { return std::bit_cast<uint64_t>(x); }
inline float float_of(uint32_t u) { return std::bit_cast<float>(u); }
inline double float_of(uint64_t u) { return std::bit_cast<double>(u); }
#endif

// Codec of a narrow float stored as Storage (uint16_t or uint8_t): widen() to float32 and
// narrow() back with the CPU's rounding (fp8 saturates, as narrow_from_f32 does).
//
// Where the GPU converts in hardware with the same IEEE round-to-nearest-even (f16 everywhere,
// fp8 from sm_89), the hardware does the work: the software codecs cost enough integer
// instructions to make the kernels compute-bound. The hardware differs from the CPU twins only
// on special values, which go through the shared software codecs instead: NaNs (the hardware
// returns a canonical NaN; the codecs keep payload bits and sign) and, for E5M2, infinities
// (satfinite would clamp them; weft keeps them infinite). Results stay bit-identical.
// Host-compiled (the emulated build), every value takes the software codecs: the hardware
// branches run only on a GPU (tests/gpu/test_kernels.cpp under scripts/gpu-check).
template <DType D> struct Codec;
template <> struct Codec<DType::f16> {
  using Storage = uint16_t;
  WEFT_HD static float widen(Storage v) {
#if defined(__CUDA_ARCH__)
    if ((v & 0x7fffu) <= 0x7c00u) return __half2float(__ushort_as_half(v));
#endif
    return kernels::detail::f16_to_f32_inline(v);
  }
  WEFT_HD static Storage narrow(float x) {
#if defined(__CUDA_ARCH__)
    if (x == x) return __half_as_ushort(__float2half_rn(x));
#endif
    return kernels::detail::f32_to_f16_inline(x);
  }
};
template <> struct Codec<DType::bf16> {
  using Storage = uint16_t;
  WEFT_HD static float widen(Storage v) { return kernels::detail::bf16_to_f32_inline(v); }
  WEFT_HD static Storage narrow(float x) { return kernels::detail::f32_to_bf16_inline(x); }
};
template <> struct Codec<DType::f8e4m3> {
  using Storage = uint8_t;
  WEFT_HD static float widen(Storage v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if ((v & 0x7fu) != 0x7fu) {  // every other code is exact in f16
      return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3)));
    }
#endif
    return float_of(kernels::detail::e4m3_bits(v));
  }
  WEFT_HD static Storage narrow(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (x == x) return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);  // inf saturates, as weft's
#endif
    return kernels::detail::to_e4m3(x, true);
  }
};
template <> struct Codec<DType::f8e5m2> {
  using Storage = uint8_t;
  // E5M2 is the upper byte of an f16: widening is exact through f16 on every GPU.
  WEFT_HD static float widen(Storage v) {
#if defined(__CUDA_ARCH__)
    if ((v & 0x7fu) <= 0x7cu) return __half2float(__ushort_as_half(static_cast<uint16_t>(v << 8)));
#endif
    return float_of(kernels::detail::e5m2_bits(v));
  }
  WEFT_HD static Storage narrow(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (fabsf(x) <= 3.402823466e38f) return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
#endif
    return kernels::detail::to_e5m2(x, true);
  }
};
template <> struct Codec<DType::f32> {
  using Storage = float;
  WEFT_HD static float widen(Storage v) { return v; }
  WEFT_HD static Storage narrow(float x) { return x; }
};

// Calls fn(Codec<D>{}) for a float type narrower than or equal to f32; false for others.
template <class Fn>
bool with_codec(DType d, Fn&& fn) {
  switch (d) {
    case DType::f16: fn(Codec<DType::f16>{}); return true;
    case DType::bf16: fn(Codec<DType::bf16>{}); return true;
    case DType::f8e4m3: fn(Codec<DType::f8e4m3>{}); return true;
    case DType::f8e5m2: fn(Codec<DType::f8e5m2>{}); return true;
    case DType::f32: fn(Codec<DType::f32>{}); return true;
    default: return false;
  }
}

}  // namespace weft::kernels::cuda::detail
