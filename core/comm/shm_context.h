// A communicator's shared-memory state when all its ranks are on one host: the segment
// (transports/shm), the arrival epoch, and the slot set of the current round. Made on first
// use by a collective that every rank calls, so all ranks make it at the same point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/comm/deadline.h"
#include "transports/shm/segment.h"

namespace weft {

class Channel;
class Comm;

class ShmContext {
 public:
  // Collective over ch's communicator: rank 0 creates the segment, the others map it, rank 0
  // unlinks the name. Returns nullptr on every rank if any rank could not take part (the
  // caller then uses the point-to-point algorithms).
  static std::unique_ptr<ShmContext> setup(Channel& ch, size_t slot_bytes);

  shm::Segment& segment() { return *segment_; }
  // Slot set for the next round: rounds alternate sets, so a set written in round r is only
  // rewritten in round r + 2, after every rank has passed round r + 1's barrier.
  int next_set() { return set_ ^= 1; }
  // Publishes this rank's arrival and waits for every rank, within the communicator's
  // deadline; fails (and breaks the communicator) on timeout, abort or a dead peer.
  void barrier(Channel& ch);

 private:
  explicit ShmContext(std::unique_ptr<shm::Segment> s) : segment_(std::move(s)) {}
  void check_waiting(Channel& ch, int waiting_for, uint64_t epoch, Clock::time_point& started);
  std::unique_ptr<shm::Segment> segment_;
  uint64_t epoch_ = 0;
  int set_ = 1;
};

}  // namespace weft
