// Expert-parallel dispatch and combine on host memory (weft/moe.h): the Moe object of one
// communicator, the Handle that keeps one batch's plan, and the exchanges. Every entry point is
// collective and runs where the communicator's operations run (its executor).
//
// Refusals without hangs: a rank whose input is bad still takes part in the first, small
// exchange of each call (dispatch: the counts all-to-all; combine and its backward: a one-word
// all-gather) with a flag set, then throws its own error; the other ranks see the flag and fail
// naming that rank. No token data moves in a call any rank refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/comm/comm.h"
#include "core/common/dtype.h"
#include "core/common/status.h"
#include "core/moe/plan.h"

namespace weft::moe {

struct MoeConfig {
  int experts = 0;
  size_t hidden = 0;
  DType dtype = DType::f32;
  bool given_placement = false;    // expert_rank was passed (else torch.chunk's rule)
  std::vector<int32_t> placement;  // [E] rank of each expert
  size_t alignment = 0;
  bool fp8 = false;
  bool device = false;
};

// Host buffers handed back by destroyed handles, for the next ones: a training step makes a
// handle per batch, and fresh [rows, H] buffers would cost a page fault per 4 KiB every step.
// Buffers keep their size (>= what a user needs; every user writes all the bytes it reads).
class BufferPool {
 public:
  // A buffer of at least `bytes` (a pooled one when one is large enough).
  std::vector<unsigned char> take(size_t bytes);
  void give(std::vector<unsigned char>&& buf);

 private:
  static constexpr size_t kMaxKept = 8;
  std::mutex mutex_;
  std::vector<std::vector<unsigned char>> free_;
};

// One batch: its plan and the buffers combine and the backward passes reuse.
struct Handle {
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  std::shared_ptr<BufferPool> pool;  // where received and returned go back to
  size_t tokens = 0;
  int topk = 0;
  std::vector<float> weights;  // [T * k] this rank's routing weights (combine's weights)
  SendPlan send;
  RecvPlan recv;
  std::vector<unsigned char> received;  // >= [rows, H] dtype, expert-major (weft_moe_handle_received)
  // The expert outputs that came back in the last weighted combine, in send-pair order, kept
  // for combine_backward's weight gradients.
  std::vector<unsigned char> returned;
  bool has_returned = false;
  // config.device: the same in device memory of the communicator's GPU (gpu::device_buffer),
  // with the plan's index arrays uploaded once and the exchange buffers reused by every call.
  struct Device {
    std::shared_ptr<void> send_tokens, gather_index, return_row, slot_row, weights, row_weight;
    std::shared_ptr<void> received, returned, send, recv;
    size_t send_bytes = 0, recv_bytes = 0;
  } dev;
};

class Moe {
 public:
  // Collective: every rank's config must agree (MISMATCH naming the field and the first rank that
  // differs). `refused`: this rank's config was bad; it still joins the check, then throws it.
  Moe(std::shared_ptr<Comm> comm, MoeConfig config, const std::optional<Error>& refused);

  const MoeConfig& config() const { return config_; }
  Comm& comm() const { return *comm_; }
  const std::shared_ptr<Comm>& comm_ptr() const { return comm_; }

  // The plan of a dispatch (routing checked, counts and pairs exchanged), before any token
  // moves; indices and weights in host memory. `refused`: the shim's checks of this rank's
  // arguments failed (the routing itself is checked here).
  std::unique_ptr<Handle> plan(const int32_t* indices, const float* weights, size_t tokens, int topk,
                               std::optional<Error> refused);
  // Host memory: plan, then the tokens. x [T, H]; indices, weights [T, k].
  std::unique_ptr<Handle> dispatch(const void* x, const int32_t* indices, const float* weights, size_t tokens,
                                   int topk, std::optional<Error> refused);
  // expert_out [rows, H] -> out [T, H]. h may be NULL only when refused (a bad handle).
  void combine(Handle* h, const void* expert_out, bool weighted, void* out, const std::optional<Error>& refused);
  // grad_out [T, H] -> grad_expert_out [rows, H], grad_weights [T, k] (NULL: not wanted).
  void combine_backward(Handle* h, const void* grad_out, void* grad_expert_out, float* grad_weights,
                        const std::optional<Error>& refused);

  // The one-word agreement of combine and its backward: throws when any rank refused.
  void agree(const char* what, const std::optional<Error>& refused);

 private:
  // Sends the rows of `rows_of` listed by h.send (one per token and destination) and returns what
  // arrived (in recv_buf_, valid until the next call), source-major, in h.recv's receive-buffer
  // order, decoded to dtype when fp8.
  const unsigned char* send_tokens(const Handle& h, const void* rows_of, bool fp8,
                                   const std::vector<size_t>& tokens_from);

  std::shared_ptr<Comm> comm_;
  MoeConfig config_;
  // Exchange buffers reused by every call (they only grow): no allocation or page faults per step.
  std::vector<unsigned char> send_buf_, recv_buf_, wire_buf_, back_buf_;
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
};

}  // namespace weft::moe
