#include "core/training/buffer_pool.h"

#include <algorithm>

namespace weft::training {

BufferPool::Buffer BufferPool::take(size_t bytes) {
  most_out_ = std::max(most_out_, ++out_);
  // The smallest kept buffer that fits.
  auto best = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->bytes >= bytes && (best == kept_.end() || it->bytes < best->bytes)) best = it;
  }
  if (best != kept_.end()) {
    Buffer b = std::move(*best);
    kept_.erase(best);
    return b;
  }
  Buffer b;
  b.data.reset(new char[bytes ? bytes : 1]);
  b.bytes = bytes;
  return b;
}

void BufferPool::give(Buffer&& b) {
  if (!b) return;
  --out_;
  kept_.push_back(std::move(b));
  if (kept_.size() <= most_out_) return;
  auto smallest = std::min_element(kept_.begin(), kept_.end(),
                                   [](const Buffer& x, const Buffer& y) { return x.bytes < y.bytes; });
  kept_.erase(smallest);
}

uint64_t BufferPool::kept_bytes() const {
  uint64_t n = 0;
  for (const Buffer& b : kept_) n += b.bytes;
  return n;
}

}  // namespace weft::training
