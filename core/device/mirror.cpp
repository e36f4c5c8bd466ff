#include "core/device/mirror.h"

#include <algorithm>

#include "core/device/watchdog.h"

namespace weft::gpu {

Mirror::Mirror(Launch& l, std::initializer_list<Span> spans) : l_(l) {
  // Merge overlapping spans into areas (sorted by address).
  std::vector<Span> sorted;
  for (const Span& s : spans) {
    if (s.dev && s.bytes) sorted.push_back(s);
  }
  std::sort(sorted.begin(), sorted.end(), [](const Span& a, const Span& b) { return a.dev < b.dev; });
  for (const Span& s : sorted) {
    const char* lo = static_cast<const char*>(s.dev);
    if (!areas_.empty() && lo < areas_.back().dev + areas_.back().bytes) {
      Area& a = areas_.back();
      size_t end = std::max<size_t>(a.bytes, static_cast<size_t>(lo - a.dev) + s.bytes);
      a.bytes = end;
      a.in = a.in || s.in;
      a.out = a.out || s.out;
    } else {
      areas_.push_back({lo, s.bytes, s.in, s.out, PinnedBuffer()});
    }
  }
  bool copied = false;
  for (Area& a : areas_) {
    a.pin = l.ctx().pinned().take(a.bytes);
    if (!a.in) continue;
    cuda_check(cudaMemcpyAsync(a.pin.data(), a.dev, a.bytes, cudaMemcpyDeviceToHost, l.stream()),
               "staging: copy from the device");
    copied = true;
  }
  if (copied) wait_stream(l.comm(), l.ctx(), l.stream(), l.subject());
}

Mirror::~Mirror() {
  for (Area& a : areas_) l_.ctx().pinned().give(std::move(a.pin));
}

void* Mirror::host(const void* dev) const {
  const char* p = static_cast<const char*>(dev);
  // Inside an area first: a buffer that starts where another one ends is an area of its own
  // (adjacent cudaMalloc blocks, or two tensors of one allocation). Taking the earlier area's end
  // for it sent an MoE dispatch's received rows past that area's pinned copy on an H100, and
  // copied stale pinned bytes back. One past an area's end stands only for an empty span there.
  for (const Area& a : areas_) {
    if (p >= a.dev && p < a.dev + a.bytes) return a.pin.data() + (p - a.dev);
  }
  for (const Area& a : areas_) {
    if (p == a.dev + a.bytes) return a.pin.data() + a.bytes;
  }
  return nullptr;
}

void Mirror::finish() {
  bool copied = false;
  for (Area& a : areas_) {
    if (!a.out) continue;
    cuda_check(cudaMemcpyAsync(const_cast<char*>(a.dev), a.pin.data(), a.bytes, cudaMemcpyHostToDevice, l_.stream()),
               "staging: copy to the device");
    copied = true;
  }
  if (copied) wait_stream(l_.comm(), l_.ctx(), l_.stream(), l_.subject());
}

}  // namespace weft::gpu
