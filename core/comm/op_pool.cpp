#include "core/comm/op_pool.h"

#include <vector>

namespace weft {
namespace {
thread_local std::vector<std::unique_ptr<transport::Op>> free_ops;
}  // namespace

std::unique_ptr<transport::Op> take_pooled_op() {
  if (free_ops.empty()) return std::make_unique<transport::Op>();
  std::unique_ptr<transport::Op> op = std::move(free_ops.back());
  free_ops.pop_back();
  // The transport's Op::begin sets peer, direction, sizes and handle; only what begin leaves
  // alone is reset here.
  op->state.store(transport::Op::State::idle, std::memory_order_relaxed);
  op->error.clear();
  return op;
}

void return_pooled_op(std::unique_ptr<transport::Op> op) {
  if (op) free_ops.push_back(std::move(op));
}

}  // namespace weft
