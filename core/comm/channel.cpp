#include "core/comm/channel.h"

#include <exception>

#include "core/comm/op_pool.h"

namespace weft {

namespace {
// The lists' storage, kept per thread for the next collective (the operations themselves go
// back to op_pool.h's cache): the host path's steady state must not allocate per call.
struct OpCache {
  std::vector<std::unique_ptr<transport::Op>> posted;
  std::vector<transport::Op*> waiting;
  std::vector<transport::Op*> table;
  std::vector<transport::Op*> one = std::vector<transport::Op*>(1);  // wait_for's list
};
thread_local OpCache op_cache;
}  // namespace

Channel::Channel(Comm& comm, const char* operation, const char* algorithm)
    : comm_(comm),
      exceptions_at_start_(std::uncaught_exceptions()),
      seq_(comm.next_sequence() % kShrinkSequence),
      subject_{operation, algorithm, seq_} {}

Channel::~Channel() {
  if (std::uncaught_exceptions() == exceptions_at_start_) comm_.log_algorithm_once(subject_.operation, subject_.algorithm);
  // Normally empty; after a failed wait these are operations UCX may still complete.
  for (auto& op : posted_) {
    if (!op->finished()) comm_.world().bury(std::move(op));
  }
  recycle_ops();
  if (op_cache.posted.capacity() < posted_.capacity()) {
    op_cache.posted.swap(posted_);
    op_cache.waiting.swap(waiting_);
  }
}


transport::Op** Channel::op_table(size_t n) {
  op_cache.table.assign(n, nullptr);
  return op_cache.table.data();
}

transport::Op* Channel::take_op() {
  if (posted_.capacity() == 0 && op_cache.posted.capacity() != 0) {
    posted_.swap(op_cache.posted);
    waiting_.swap(op_cache.waiting);
  }
  posted_.push_back(take_pooled_op());
  waiting_.push_back(posted_.back().get());
  return posted_.back().get();
}

void Channel::recycle_ops() {
  for (auto& op : posted_) {
    if (op && op->finished()) return_pooled_op(std::move(op));
  }
  posted_.clear();
  waiting_.clear();
}

transport::Op* Channel::isend(int peer, uint32_t step, const void* buf, size_t bytes) {
  if (bytes == 0) return nullptr;
  transport::Op* op = take_op();
  comm_.world().transport().send(*op, comm_.world_rank_of(peer), make_tag(comm_.id(), comm_.rank(), seq_, step),
                                 buf, bytes);
  return op;
}

transport::Op* Channel::irecv(int peer, uint32_t step, void* buf, size_t bytes) {
  if (bytes == 0) return nullptr;
  transport::Op* op = take_op();
  comm_.world().transport().recv(*op, comm_.world_rank_of(peer), make_tag(comm_.id(), peer, seq_, step), buf,
                                 bytes);
  return op;
}

void Channel::wait_for(transport::Op* op) {
  if (!op) return;
  op_cache.one[0] = op;
  try {
    wait_ops(comm_, op_cache.one, subject_);
  } catch (...) {
    // wait_ops cancelled only `op`; the others may still write into the caller's buffers.
    for (transport::Op* other : waiting_) {
      if (!other->finished()) comm_.world().transport().cancel(*other);
    }
    throw;
  }
}

void Channel::wait() {
  if (waiting_.empty()) return;
  wait_ops(comm_, waiting_, subject_);
  recycle_ops();
}

void Channel::sendrecv(int to, const void* sbuf, size_t sbytes, int from, void* rbuf, size_t rbytes,
                       uint32_t step) {
  irecv(from, step, rbuf, rbytes);
  isend(to, step, sbuf, sbytes);
  wait();
}

}  // namespace weft
