// Reused host buffers for ZeRO's transient memory (stage 2-3 gradient buckets, stage 3 gathered
// groups): a step takes and gives back the same sizes every time, and a fresh allocation of
// megabytes is a fresh mapping whose every page faults on first touch. Contents are not
// cleared: the caller writes what it reads (and zeroes a bucket's padding itself).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace weft::training {

class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t bytes = 0;
    explicit operator bool() const { return data != nullptr; }
  };

  // A buffer of at least `bytes` (a kept one when one fits, else a new one).
  Buffer take(size_t bytes);
  // Keeps b for reuse (at most kKept buffers; the smallest goes first).
  void give(Buffer&& b);
  uint64_t kept_bytes() const;

 private:
  static constexpr size_t kKept = 4;
  std::vector<Buffer> kept_;
};

}  // namespace weft::training
