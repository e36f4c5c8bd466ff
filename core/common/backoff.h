// Polling without hogging a core (ranks may outnumber cores, DESIGN.md): spin briefly, then
// yield, then sleep in growing steps of at most 200 us.
#pragma once

#include <sched.h>
#include <time.h>

namespace weft {

class Backoff {
 public:
  void pause() {
    ++rounds_;
    if (rounds_ < 64) return;
    if (rounds_ < 320) {
      sched_yield();
      return;
    }
    int step = rounds_ - 320;
    long us = step < 8 ? (1L << step) : 200;
    struct timespec ts{0, us * 1000};
    nanosleep(&ts, nullptr);
  }
  void reset() { rounds_ = 0; }

 private:
  int rounds_ = 0;
};

}  // namespace weft
