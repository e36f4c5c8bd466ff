// The stand-in NCCL's arithmetic: see fake_nccl_reduce.h.
#include "tests/cuda_emulator/fake_nccl_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace weft::fake_nccl {

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

namespace {

// NCCL's float min/max are fminf/fmaxf: a NaN operand is dropped.
template <class T>
T apply(ncclRedOp_t op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ncclProd: return a * b;
      case ncclMax: return std::fmax(a, b);
      case ncclMin: return std::fmin(a, b);
      default: return a + b;  // sum, and avg's sum of pre-scaled values
    }
  } else {
    // Wrap-around arithmetic in the unsigned type (8-bit values promote to int, where 255*255
    // still fits), so that overflow is defined, as on the GPU.
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ncclProd: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ncclMax: return std::max(a, b);
      case ncclMin: return std::min(a, b);
      default: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    }
  }
}

template <class T>
void reduce_typed(void* acc, const void* x, size_t count, ncclRedOp_t op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(x);
  for (size_t i = 0; i < count; ++i) a[i] = apply<T>(op, a[i], b[i]);
}

}  // namespace

// acc[i] = acc[i] op x[i].
void reduce_into(void* acc, const void* x, size_t count, ncclDataType_t t, ncclRedOp_t op) {
  switch (t) {
    case ncclInt8: return reduce_typed<int8_t>(acc, x, count, op);
    case ncclUint8: return reduce_typed<uint8_t>(acc, x, count, op);
    case ncclInt32: return reduce_typed<int32_t>(acc, x, count, op);
    case ncclUint32: return reduce_typed<uint32_t>(acc, x, count, op);
    case ncclInt64: return reduce_typed<int64_t>(acc, x, count, op);
    case ncclUint64: return reduce_typed<uint64_t>(acc, x, count, op);
    case ncclFloat32: return reduce_typed<float>(acc, x, count, op);
    case ncclFloat64: return reduce_typed<double>(acc, x, count, op);
    default:
      for (size_t i = 0; i < count; ++i) narrow(t, acc, i, apply<float>(op, widen(t, acc, i), widen(t, x, i)));
  }
}

// ncclAvg on floats is NCCL's PreMulSum: every operand is first multiplied by 1/nranks (in the
// element type), then summed.
void premultiply(void* buf, size_t count, ncclDataType_t t, int nranks) {
  if (t == ncclFloat64) {
    double s = 1.0 / nranks;
    for (size_t i = 0; i < count; ++i) static_cast<double*>(buf)[i] *= s;
  } else if (t == ncclFloat32) {
    float s = 1.0f / static_cast<float>(nranks);
    for (size_t i = 0; i < count; ++i) static_cast<float*>(buf)[i] *= s;
  } else {
    uint32_t one = 0;
    narrow(t, &one, 0, 1.0f / static_cast<float>(nranks));
    const float s = widen(t, &one, 0);
    for (size_t i = 0; i < count; ++i) narrow(t, buf, i, widen(t, buf, i) * s);
  }
}

namespace {

// ncclAvg on integers is NCCL's SumPostDiv: the sum divided by nranks (truncating).
template <class T>
void divide_typed(void* buf, size_t count, int nranks) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(nranks));
}

}  // namespace

void postdivide(void* buf, size_t count, ncclDataType_t t, int nranks) {
  switch (t) {
    case ncclInt8: return divide_typed<int8_t>(buf, count, nranks);
    case ncclUint8: return divide_typed<uint8_t>(buf, count, nranks);
    case ncclInt32: return divide_typed<int32_t>(buf, count, nranks);
    case ncclUint32: return divide_typed<uint32_t>(buf, count, nranks);
    case ncclInt64: return divide_typed<int64_t>(buf, count, nranks);
    case ncclUint64: return divide_typed<uint64_t>(buf, count, nranks);
    default: return;
  }
}

}  // namespace weft::fake_nccl
