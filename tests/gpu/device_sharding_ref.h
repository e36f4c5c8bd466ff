// What the multi-rank device tests of sharded tensors share (mp_redistribute_device.cpp,
// mp_checkpoint_device.cpp): the process's rank and failure tally, and the reference, written
// here from weft/mesh.h's prose and nothing of weft's: the split rule, layouts and boxes, the
// global tensor as a function of the element's index (with PARTIAL(sum) terms by coordinate),
// dtype encodings, and device pieces (contiguous, padded, transposed) read back on a
// non-blocking stream.
#pragma once

#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "injection.h"
#include "mp_common.h"

namespace device_sharding {

using Shape = std::vector<int64_t>;

inline int g_rank = 0, g_size = 1;
inline int g_failures = 0;
inline mpt::InjectTally g_tally;
inline cudaStream_t g_readback = nullptr;  // non-blocking: no implicit order with the legacy stream

// ------------------------------------------------------------------ the reference

// torch.chunk's split (weft/mesh.h): n over k, chunk c = ceil(n / k); rank i holds
// [i*c, min((i+1)*c, n)), empty past the end.
inline void chunk(int64_t n, int k, int i, int64_t* start, int64_t* len) {
  const int64_t c = (n + k - 1) / k;
  const int64_t lo = std::min<int64_t>(static_cast<int64_t>(i) * c, n);
  const int64_t hi = std::min<int64_t>(static_cast<int64_t>(i + 1) * c, n);
  *start = lo;
  *len = hi - lo;
}

struct Placement {
  char kind;  // 'S', 'R', 'P' (PARTIAL(sum))
  int dim;
};
inline Placement S(int d) { return {'S', d}; }
inline Placement R() { return {'R', 0}; }
inline Placement Psum() { return {'P', 0}; }
using Layout = std::vector<Placement>;

inline std::string layout_name(const Layout& l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i) {
    s += i ? "," : "";
    s += l[i].kind == 'S' ? "S(" + std::to_string(l[i].dim) + ")" : (l[i].kind == 'R' ? "R" : "P(sum)");
  }
  return s + "]";
}

// A mesh as the test defines it: shape and the world ranks of its positions (row-major).
struct MeshDef {
  std::vector<int> shape;
  std::vector<int> ranks;
  weft_mesh_t handle = nullptr;

  int position() const {
    for (size_t p = 0; p < ranks.size(); ++p) {
      if (ranks[p] == g_rank) return static_cast<int>(p);
    }
    return -1;
  }
  std::vector<int> coords(int pos) const {
    std::vector<int> c(shape.size());
    for (size_t m = shape.size(); m-- > 0;) {
      c[m] = pos % shape[m];
      pos /= shape[m];
    }
    return c;
  }
};

struct Box {
  Shape offset, shape;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

// The global box held at mesh coordinates `c`: each tensor dim split by the mesh dims that
// shard it, left to right, each splitting the previous chunk again.
inline Box box_of(const MeshDef& mesh, const Layout& layout, const Shape& global, const std::vector<int>& c) {
  Box b{Shape(global.size(), 0), global};
  for (size_t m = 0; m < layout.size(); ++m) {
    if (layout[m].kind != 'S') continue;
    const auto d = static_cast<size_t>(layout[m].dim);
    int64_t start = 0, len = 0;
    chunk(b.shape[d], mesh.shape[m], c[m], &start, &len);
    b.offset[d] += start;
    b.shape[d] = len;
  }
  return b;
}

inline int64_t linear(const Shape& global, const Shape& idx) {
  int64_t l = 0;
  for (size_t d = 0; d < global.size(); ++d) l = l * global[d] + idx[d];
  return l;
}

// The global tensor: small integers, exact in every dtype used here (bf16 holds 0..256).
inline int64_t value(int64_t g, uint64_t seed) { return (g * 37 + static_cast<int64_t>(seed) * 11) % 97; }

// What coordinate c of k along a PARTIAL(sum) mesh dim holds: small terms, the last one the rest.
inline int64_t term(int64_t g, uint64_t seed, int c, int k) {
  if (c < k - 1) return (g + 3 * c) % 7;
  int64_t rest = value(g, seed);
  for (int j = 0; j < k - 1; ++j) rest -= (g + 3 * j) % 7;
  return rest;
}

// ------------------------------------------------------------------ dtypes and buffers

inline size_t elem_size(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT64: return 8;
    case WEFT_BFLOAT16: return 2;
    default: return 4;  // f32, i32
  }
}
inline const char* dtype_text(weft_dtype_t dt) {
  switch (dt) {
    case WEFT_FLOAT64: return "f64";
    case WEFT_BFLOAT16: return "bf16";
    case WEFT_INT32: return "i32";
    default: return "f32";
  }
}

// The bit pattern of the integer v in dt (exact for the values above).
inline uint64_t encode(weft_dtype_t dt, int64_t v) {
  switch (dt) {
    case WEFT_FLOAT64: {
      const double x = static_cast<double>(v);
      uint64_t b;
      std::memcpy(&b, &x, 8);
      return b;
    }
    case WEFT_BFLOAT16: {
      const float x = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &x, 4);
      return b >> 16;  // exact: small integers have no bits below the top 16
    }
    case WEFT_INT32: return static_cast<uint32_t>(static_cast<int32_t>(v));
    default: {
      const float x = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &x, 4);
      return b;
    }
  }
}

inline void store(void* p, size_t elem, uint64_t bits) { std::memcpy(p, &bits, elem); }  // little-endian
inline uint64_t load(const void* p, size_t elem) {
  uint64_t b = 0;
  std::memcpy(&b, p, elem);
  return b;
}

enum class View { contiguous, padded, transposed };
inline const char* view_name(View v) {
  return v == View::contiguous ? "contiguous" : (v == View::padded ? "padded" : "transposed");
}

constexpr unsigned char kGap = 0x5A;      // bytes of a buffer that are no element
constexpr unsigned char kGarbage = 0xCD;  // dst elements before the call

// A local piece in device memory: a buffer, the view's strides (elements) and byte offset.
struct Piece {
  Shape shape, strides;
  size_t elem = 4;
  uint64_t byte_offset = 0;
  size_t bytes = 0;
  void* dev = nullptr;
  std::vector<unsigned char> image;  // the buffer's bytes as uploaded

  Piece(const Shape& s, size_t e, View v) : shape(s), elem(e) {
    const size_t nd = s.size();
    strides.assign(nd, 0);
    int64_t st = 1;
    if (v == View::transposed) {
      for (size_t k = 0; k < nd; ++k) {
        strides[k] = st;
        st *= std::max<int64_t>(s[k], 1);
      }
    } else {
      for (size_t k = nd; k-- > 0;) {
        strides[k] = st;
        st *= std::max<int64_t>(s[k], 1) + (v == View::padded ? 1 : 0);
      }
    }
    byte_offset = v == View::padded ? elem : 0;
    int64_t last = 0;
    for (size_t k = 0; k < nd; ++k) last += (std::max<int64_t>(s[k], 1) - 1) * strides[k];
    bytes = byte_offset + static_cast<size_t>(last + 1) * elem + elem;  // and one element's bytes past the end
    image.assign(bytes, kGap);
    if (cudaMalloc(&dev, bytes) != cudaSuccess) mpt::die("cudaMalloc of %zu bytes failed", bytes);
  }
  ~Piece() { cudaFree(dev); }
  Piece(const Piece&) = delete;
  Piece& operator=(const Piece&) = delete;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    return n;
  }
  size_t offset_of(const Shape& idx) const {
    int64_t o = 0;
    for (size_t k = 0; k < shape.size(); ++k) o += idx[k] * strides[k];
    return byte_offset + static_cast<size_t>(o) * elem;
  }
  // Calls f(local index, k) for every element in row-major order.
  template <class F>
  void for_each(F&& f) const {
    const int64_t n = numel();
    Shape idx(shape.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      f(idx, k);
      for (size_t d = shape.size(); d-- > 0;) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  }
  // Settled before returning: cudaMemcpy from pageable memory returns before the bytes land, and
  // the tests' user streams are non-blocking (not ordered after it).
  void upload() const {
    cudaMemcpy(dev, image.data(), bytes, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
  }
  // The device buffer's bytes, read on the test's own non-blocking stream.
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> out(bytes);
    cudaMemcpyAsync(out.data(), dev, bytes, cudaMemcpyDeviceToHost, g_readback);
    cudaStreamSynchronize(g_readback);
    return out;
  }
  weft_tensor_t tensor(weft_dtype_t dt) const {
    return {dev, WEFT_DEVICE_CUDA, 0, static_cast<int>(shape.size()), dt, shape.data(), strides.data(), byte_offset};
  }
};

}  // namespace device_sharding
