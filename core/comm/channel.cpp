#include "core/comm/channel.h"

#include <exception>

namespace weft {

Channel::Channel(Comm& comm, const char* operation, const char* algorithm)
    : comm_(comm),
      exceptions_at_start_(std::uncaught_exceptions()),
      seq_(comm.next_sequence() % kP2PSequence),
      subject_{operation, algorithm, seq_} {}

Channel::~Channel() {
  if (std::uncaught_exceptions() == exceptions_at_start_) comm_.log_algorithm_once(subject_.operation, subject_.algorithm);
  // Normally empty; after a failed wait these are operations UCX may still complete.
  for (auto& op : posted_) {
    if (!op->finished()) comm_.world().bury(std::move(op));
  }
}

transport::Op* Channel::take_op() {
  posted_.push_back(std::make_unique<transport::Op>());
  waiting_.push_back(posted_.back().get());
  return posted_.back().get();
}

void Channel::isend(int peer, uint32_t step, const void* buf, size_t bytes) {
  if (bytes == 0) return;
  transport::Op* op = take_op();
  comm_.world().transport().send(*op, comm_.world_rank_of(peer), make_tag(comm_.id(), comm_.rank(), seq_, step),
                                 buf, bytes);
}

void Channel::irecv(int peer, uint32_t step, void* buf, size_t bytes) {
  if (bytes == 0) return;
  transport::Op* op = take_op();
  comm_.world().transport().recv(*op, comm_.world_rank_of(peer), make_tag(comm_.id(), peer, seq_, step), buf,
                                 bytes);
}

void Channel::wait() {
  if (waiting_.empty()) return;
  wait_ops(comm_, waiting_, subject_);
  waiting_.clear();
  posted_.clear();
}

void Channel::sendrecv(int to, const void* sbuf, size_t sbytes, int from, void* rbuf, size_t rbytes,
                       uint32_t step) {
  irecv(from, step, rbuf, rbytes);
  isend(to, step, sbuf, sbytes);
  wait();
}

}  // namespace weft
