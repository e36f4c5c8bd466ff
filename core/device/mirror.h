// Private to core/device: pinned host copies of device buffers for one staged operation.
// Spans that overlap (the in-place forms of weft.h) share one pinned area, so the host algorithm
// sees the same aliasing as the device buffers. Copies run on the launch's stream (after the
// caller's earlier work on it) and are waited for with the watchdog.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "core/device/launch.h"
#include "transports/cuda/cuda_util.h"

namespace weft::gpu {

struct Span {
  const void* dev;  // device address; unused when bytes == 0
  size_t bytes;
  bool in;   // copied to the host before the host algorithm runs
  bool out;  // copied back to the device afterwards
};

class Mirror {
 public:
  // Allocates the pinned areas and copies the `in` spans to them (waiting for the copies).
  Mirror(Launch& l, std::initializer_list<Span> spans);
  ~Mirror();
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  // The pinned address standing for device address `dev` (inside a span), or nullptr.
  void* host(const void* dev) const;
  // Copies the `out` spans back to the device and waits.
  void finish();

 private:
  struct Area {
    const char* dev;
    size_t bytes;
    bool in, out;
    PinnedBuffer pin;
  };
  Launch& l_;
  std::vector<Area> areas_;
};

}  // namespace weft::gpu
