// The live handles of one kind: tells a live handle from a destroyed or foreign pointer without
// dereferencing it (DESIGN.md: "caught where cheap, never UB by design"), and says which in the
// words of the function that was given it. Every handle struct starts with `uint64_t magic`.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

#include "core/common/status.h"

namespace weft::capi {

template <typename T, uint64_t Magic>
class Registry {
 public:
  // expected: "a mesh from weft_mesh_create"; live: "a live mesh"; gone: "destroyed".
  constexpr Registry(const char* expected, const char* live, const char* gone)
      : expected_(expected), live_noun_(live), gone_(gone) {}

  T* add(std::unique_ptr<T> h) {
    h->magic = Magic;
    T* p = h.release();
    std::unique_lock<std::shared_mutex> lock(mutex_);
    live_.insert(p);
    return p;
  }
  // Throws invalid_argument naming `arg` when h is NULL, gone or not a handle of this kind.
  T* find(T* h, const char* arg) const {
    if (!h) fail(Status::invalid_argument, "%s is NULL; expected %s", arg, expected_);
    bool live;
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      live = live_.count(h) != 0;
    }
    if (!live || h->magic != Magic) {
      fail(Status::invalid_argument, "%s (%p) is not %s: %s, or not made by weft", arg, static_cast<void*>(h),
           live_noun_, gone_);
    }
    return h;
  }
  // Deletes h when it is live (a second destroy of one handle does nothing).
  void remove(T* h) {
    {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      if (live_.erase(h) == 0) return;
    }
    h->magic = 0;
    delete h;
  }

 private:
  const char* expected_;
  const char* live_noun_;
  const char* gone_;
  mutable std::shared_mutex mutex_;
  std::unordered_set<T*> live_;
};

}  // namespace weft::capi
