#include "sharded_buffer.h"

#include <algorithm>
#include <cstring>

#include "reference.h"

namespace mpt {
namespace {
constexpr size_t kGuardBytes = 64;
}

LocalBuffer::LocalBuffer(weft_dtype_t dt, const shard::Shape& shape, View view)
    : dt_(dt), esize_(dtype_bytes(dt)), shape_(shape), strides_(shape.size(), 1), numel_(shard::numel(shape)),
      contiguous_(view == View::contiguous) {
  const int nd = static_cast<int>(shape.size());
  if (view == View::transposed) {
    // Column-major: the first index varies fastest (what a transposed contiguous tensor is).
    int64_t s = 1;
    for (int d = 0; d < nd; ++d) {
      strides_[d] = s;
      s *= std::max<int64_t>(shape[d], 1);
    }
  } else {
    // Row-major; padded: every row (last dim) is 3 elements longer than its data, and a 1-d
    // piece takes every other element. The view starts 5 elements into the buffer through
    // byte_offset (DLPack's field), which weft must honour.
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; --d) {
      strides_[d] = s;
      int64_t ext = std::max<int64_t>(shape[d], 1);
      if (view == View::padded && d == nd - 1) ext = nd == 1 ? 2 * ext : ext + 3;
      s *= ext;
    }
    if (view == View::padded) byte_offset_ = 5 * esize_;
  }
  size_t last = 0;
  for (int d = 0; d < nd; ++d)
    if (shape[d] > 0) last += static_cast<size_t>((shape[d] - 1) * strides_[d]);
  span_ = byte_offset_ + (numel_ > 0 ? (last + 1) * esize_ : 0);
  mem_.assign(span_ + 2 * kGuardBytes, kGap);
  for (size_t i = 0; i < kGuardBytes; ++i) mem_[i] = mem_[kGuardBytes + span_ + i] = kGuard;
  is_elem_.assign(span_, false);
  for_each([&](const int64_t* idx) {
    const size_t o = offset_bytes(idx);
    for (size_t b = 0; b < esize_; ++b) {
      is_elem_[o + b] = true;
      mem_[kGuardBytes + o + b] = kGarbage;
    }
  });
}

weft_tensor_t LocalBuffer::view() {
  weft_tensor_t t;
  t.data = mem_.data() + kGuardBytes;
  t.device_type = WEFT_DEVICE_CPU;
  t.device_id = 0;
  t.ndim = static_cast<int>(shape_.size());
  t.dtype = dt_;
  t.shape = shape_.data();
  // Contiguous views pass strides = NULL ("contiguous row-major", common.h), as most callers do.
  t.strides = contiguous_ ? nullptr : strides_.data();
  t.byte_offset = byte_offset_;
  return t;
}

size_t LocalBuffer::offset_bytes(const int64_t* idx) const {
  size_t o = 0;
  for (size_t d = 0; d < shape_.size(); ++d) o += static_cast<size_t>(idx[d] * strides_[d]);
  return byte_offset_ + o * esize_;
}

uint64_t LocalBuffer::get(const int64_t* idx) const {
  return load_bits(dt_, mem_.data() + kGuardBytes + offset_bytes(idx), 0);
}

void LocalBuffer::set(const int64_t* idx, uint64_t bits) {
  store_bits(dt_, mem_.data() + kGuardBytes + offset_bytes(idx), 0, bits);
}

void LocalBuffer::for_each(const std::function<void(const int64_t* idx)>& fn) const {
  if (numel_ == 0) return;
  std::vector<int64_t> idx(shape_.size(), 0);
  for (int64_t k = 0; k < numel_; ++k) {
    fn(idx.data());
    for (int d = static_cast<int>(shape_.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape_[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<int64_t> LocalBuffer::index_of(int64_t k) const {
  std::vector<int64_t> idx(shape_.size(), 0);
  for (int d = static_cast<int>(shape_.size()) - 1; d >= 0; --d) {
    idx[d] = k % shape_[d];
    k /= shape_[d];
  }
  return idx;
}

bool LocalBuffer::guards_ok() const {
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (mem_[i] != kGuard || mem_[kGuardBytes + span_ + i] != kGuard) return false;
  return true;
}

size_t LocalBuffer::gaps_changed(size_t* first) const {
  size_t n = 0;
  for (size_t b = 0; b < span_; ++b) {
    if (is_elem_[b] || mem_[kGuardBytes + b] == kGap) continue;
    if (n++ == 0 && first) *first = b;
  }
  return n;
}

}  // namespace mpt
