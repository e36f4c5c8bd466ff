// One collective's point-to-point traffic: it owns the collective's sequence number, builds
// the tags (communicator id | sender rank | sequence | step) so that two communicators or two
// collectives never match each other's messages, and waits through wait_ops().
//
// Zero-byte transfers are skipped: both sides of a collective always agree on sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/comm/comm.h"
#include "core/comm/progress.h"
#include "transports/transport.h"

namespace weft {

// Tag layout, 16 bits each: communicator id, sender's rank in the communicator, sequence
// number, step. Sequence 0xffff is reserved for user point-to-point messages and 0xfffe for
// the shrink agreement (core/comm/shrink.h), which must not meet a collective's messages on a
// broken communicator whose ranks are out of step; collectives use 0..0xfffd.
constexpr uint32_t kMaxCommId = 0xfffe;  // 0xffff carries failure notices (World)
constexpr int kMaxRanks = 0x10000;
constexpr uint32_t kP2PSequence = 0xffff;
constexpr uint32_t kShrinkSequence = 0xfffe;
// Steps from here up belong to the WEFT_DEBUG=check argument exchange.
constexpr uint32_t kCheckStepBase = 0xf000;

inline transport::Tag make_tag(uint32_t comm_id, int sender, uint32_t seq, uint32_t step) {
  return (static_cast<uint64_t>(comm_id & 0xffff) << 48) | (static_cast<uint64_t>(sender & 0xffff) << 32) |
         (static_cast<uint64_t>(seq & 0xffff) << 16) | static_cast<uint64_t>(step & 0xffff);
}

class Channel {
 public:
  Channel(Comm& comm, const char* operation, const char* algorithm);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  Comm& comm() { return comm_; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  uint32_t sequence() const { return seq_; }
  const char* operation() const { return subject_.operation; }
  // The algorithm running the operation (named in error messages; with WEFT_DEBUG=info, logged
  // once per communicator when an operation completes with it, so the log names only
  // algorithms that ran, never one that was tried and declined).
  void set_algorithm(const char* algorithm) { subject_.algorithm = algorithm; }

  // Each returns the posted operation for wait_for(), or nullptr for a zero-byte transfer.
  // Two operations with the same peer and step match in the order they were posted (UCX's
  // tag matching keeps one sender's messages in order): the pipelined algorithms send a
  // block's chunks under one step.
  transport::Op* isend(int peer, uint32_t step, const void* buf, size_t bytes);
  transport::Op* irecv(int peer, uint32_t step, void* buf, size_t bytes);
  // Waits for one posted operation (nullptr: returns at once), driving all of them. It stays
  // among those the next wait() checks. On failure every pending operation is cancelled.
  void wait_for(transport::Op* op);
  // Waits for everything posted since the last wait.
  void wait();
  // n null entries for an algorithm's bookkeeping of posted operations (one array per thread,
  // reused: valid until the next call, allocation-free in the steady state).
  static transport::Op** op_table(size_t n);
  // isend + irecv + wait.
  void sendrecv(int to, const void* sbuf, size_t sbytes, int from, void* rbuf, size_t rbytes, uint32_t step);

 private:
  transport::Op* take_op();
  void recycle_ops();  // after a wait: finished operations back to the per-thread cache

  Comm& comm_;
  int exceptions_at_start_;  // std::uncaught_exceptions() when constructed
  uint32_t seq_;
  WaitSubject subject_;
  std::vector<std::unique_ptr<transport::Op>> posted_;
  std::vector<transport::Op*> waiting_;
};

}  // namespace weft
