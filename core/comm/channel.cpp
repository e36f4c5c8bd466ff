#include "core/comm/channel.h"

#include <exception>

namespace weft {

namespace {
// Finished operations and the lists' storage, kept per thread for the next collective: the
// pipelined algorithms post an operation per chunk, and the host path's steady state must not
// allocate per chunk (tests/multiproc/alloc-budget.txt). Unfinished operations never come
// back here: they go to the world's graveyard.
struct OpCache {
  std::vector<std::unique_ptr<transport::Op>> free_ops;
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
  if (op_cache.free_ops.empty()) {
    posted_.push_back(std::make_unique<transport::Op>());
  } else {
    posted_.push_back(std::move(op_cache.free_ops.back()));
    op_cache.free_ops.pop_back();
    // The transport's Op::begin sets peer, direction, sizes and handle; only what begin leaves
    // alone is reset here.
    transport::Op& op = *posted_.back();
    op.state.store(transport::Op::State::idle, std::memory_order_relaxed);
    op.error.clear();
  }
  waiting_.push_back(posted_.back().get());
  return posted_.back().get();
}

void Channel::recycle_ops() {
  for (auto& op : posted_) {
    if (op && op->finished()) op_cache.free_ops.push_back(std::move(op));
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
