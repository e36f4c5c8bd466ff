// Reusable temporary buffers for one communicator's collectives (they run one at a time), so
// the steady state allocates nothing. Slots let a wrapper (e.g. the float32 widening of
// low-precision reductions) and the algorithm it calls hold buffers at the same time.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "core/common/status.h"

namespace weft {

class Scratch {
 public:
  static constexpr int kSlots = 4;
  // A buffer of at least `bytes`, 64-byte aligned, valid until the next get() of that slot.
  void* get(int slot, size_t bytes) {
    Slot& s = slots_[slot];
    if (s.capacity < bytes) {
      size_t cap = (bytes + 63) & ~size_t{63};
      void* p = std::aligned_alloc(64, cap);
      if (!p) fail(Status::out_of_memory, "could not allocate %zu bytes of scratch memory", cap);
      s.data.reset(p);
      s.capacity = cap;
    }
    return s.data.get();
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<void, Free> data;
    size_t capacity = 0;
  };
  Slot slots_[kSlots];
};

}  // namespace weft
