// Reused host buffers for ZeRO's transient memory (stage 2-3 gradient buckets, stage 3 gathered
// groups): a step takes and gives back the same sizes every time, and a fresh allocation of
// megabytes is a fresh mapping whose every page faults on first touch. Contents are not
// cleared: the caller writes what it reads (and zeroes a bucket's padding itself). Not
// thread-safe: one ZeRO handle's calls, on one thread.
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
  // Keeps b for reuse: as many buffers as were ever out at once (a step that needed them will
  // need them again; the memory was in use at that peak anyway), the smallest dropped first.
  void give(Buffer&& b);
  uint64_t kept_bytes() const;

 private:
  std::vector<Buffer> kept_;
  size_t out_ = 0;       // buffers taken and not given back
  size_t most_out_ = 0;  // the most that ever were
};

}  // namespace weft::training
