// The set of live handles of one kind: tells a live handle from a destroyed or foreign pointer
// without dereferencing it (DESIGN.md: "caught where cheap, never UB by design").
#pragma once

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace weft::capi {

template <typename T>
class Registry {
 public:
  void add(T* p) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    live_.insert(p);
  }
  bool contains(const T* p) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return live_.count(const_cast<T*>(p)) != 0;
  }
  // True if p was live (and is now removed).
  bool remove(T* p) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    return live_.erase(p) != 0;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_set<T*> live_;
};

}  // namespace weft::capi
