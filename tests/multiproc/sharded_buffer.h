// A rank's local piece of a sharded tensor in caller memory, as the tests lay it out: a
// weft_tensor_t view over a buffer with guard bytes on both sides, contiguous (strides NULL), padded (rows
// longer than their data, plus a byte_offset) or transposed (column-major strides), with the
// bytes between elements ("gaps") filled with a pattern that must survive every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "redistribute_cases.h"
#include "weft/weft.h"

namespace mpt {

class LocalBuffer {
 public:
  static constexpr unsigned char kGarbage = 0xCD;  // destination elements before the call
  static constexpr unsigned char kGap = 0x5A;      // bytes of the buffer that are no element
  static constexpr unsigned char kGuard = 0xA5;    // bytes around the buffer

  LocalBuffer(weft_dtype_t dt, const shard::Shape& shape, View view);

  weft_tensor_t view();  // points into this object: keep it alive while the view is used
  int64_t numel() const { return numel_; }
  uint64_t get(const int64_t* idx) const;
  void set(const int64_t* idx, uint64_t bits);
  // Calls fn(idx) for every local index in row-major order.
  void for_each(const std::function<void(const int64_t* idx)>& fn) const;
  // Index of the k-th element in row-major order.
  std::vector<int64_t> index_of(int64_t k) const;
  bool guards_ok() const;
  // Number of gap bytes that changed (the first one's position in *first).
  size_t gaps_changed(size_t* first) const;

 private:
  size_t offset_bytes(const int64_t* idx) const;
  weft_dtype_t dt_;
  size_t esize_;
  shard::Shape shape_, strides_;
  int64_t numel_ = 0;
  bool contiguous_ = false;          // the view passes strides = NULL
  size_t byte_offset_ = 0;
  size_t span_ = 0;                 // bytes from data to the end of the last element
  std::vector<unsigned char> mem_;  // guard | span_ bytes | guard
  std::vector<bool> is_elem_;       // per byte of span_: part of an element
};

}  // namespace mpt
