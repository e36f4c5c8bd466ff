// A point in time after which a wait gives up (DESIGN.md: "every blocking wait has a deadline").
#pragma once

#include <chrono>

namespace weft {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds budget) : budget_(budget), at_(Clock::now() + budget) {}
  bool expired() const { return Clock::now() >= at_; }
  std::chrono::milliseconds budget() const { return budget_; }
  std::chrono::milliseconds remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds(0);
  }

 private:
  std::chrono::milliseconds budget_;
  Clock::time_point at_;
};

}  // namespace weft
