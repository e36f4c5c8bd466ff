#include "core/moe/moe.h"

#include <cmath>
#include <cstring>

#include "core/collectives/collectives.h"
#include "core/moe/layout.h"
#include "core/training/agreement.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/moe_rows.h"

namespace weft::moe {
namespace {

std::vector<size_t> prefix(const std::vector<size_t>& counts, size_t unit) {
  std::vector<size_t> d(counts.size());
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    d[i] = at;
    at += counts[i] * unit;
  }
  return d;
}

std::vector<size_t> times(const std::vector<size_t>& counts, size_t unit) {
  std::vector<size_t> v(counts);
  for (size_t& c : v) c *= unit;
  return v;
}

size_t total(const std::vector<size_t>& counts) {
  size_t s = 0;
  for (size_t c : counts) s += c;
  return s;
}

// Byte exchange of rows: `sent[r]` rows of row_bytes to rank r, `from[s]` rows from rank s, into
// recv (grown as needed; a buffer reused across calls costs no allocation or page faults).
void exchange_rows(Comm& comm, const unsigned char* send, const std::vector<size_t>& sent,
                   const std::vector<size_t>& from, size_t row_bytes, std::vector<unsigned char>& recv) {
  if (recv.size() < total(from) * row_bytes) recv.resize(total(from) * row_bytes);
  coll::alltoallv(comm, send, times(sent, row_bytes), prefix(sent, row_bytes), recv.data(), times(from, row_bytes),
                  prefix(from, row_bytes), DType::u8);
}

// fp8 dispatch's wire row: the float32 scale (absmax / 448), then H E4M3 bytes of x / scale.
void encode_fp8_row(unsigned char* wire, const void* row, size_t hidden, DType dtype, std::vector<float>& tmp) {
  kernels::widen_to_f32(tmp.data(), row, dtype, hidden);
  float absmax = 0.0f;
  for (size_t i = 0; i < hidden; ++i) absmax = std::fmax(absmax, std::fabs(tmp[i]));
  const float scale = absmax / 448.0f;
  std::memcpy(wire, &scale, sizeof scale);
  for (size_t i = 0; i < hidden; ++i) {
    wire[sizeof scale + i] = kernels::f32_to_e4m3(scale > 0.0f ? tmp[i] / scale : 0.0f, true);
  }
}

void decode_fp8_row(void* row, const unsigned char* wire, size_t hidden, DType dtype, std::vector<float>& tmp) {
  float scale;
  std::memcpy(&scale, wire, sizeof scale);
  for (size_t i = 0; i < hidden; ++i) tmp[i] = kernels::e4m3_to_f32(wire[sizeof scale + i]) * scale;
  kernels::narrow_from_f32(row, dtype, tmp.data(), hidden);
}

}  // namespace

std::vector<unsigned char> BufferPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].size() >= bytes) {
        std::vector<unsigned char> b = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<ptrdiff_t>(i));
        return b;
      }
    }
  }
  return std::vector<unsigned char>(bytes);
}

void BufferPool::give(std::vector<unsigned char>&& buf) {
  if (buf.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.size() < kMaxKept) free_.push_back(std::move(buf));
}

Handle::~Handle() {
  if (!pool) return;
  pool->give(std::move(received));
  pool->give(std::move(returned));
}

Moe::Moe(std::shared_ptr<Comm> comm, MoeConfig config, const std::optional<Error>& refused)
    : comm_(std::move(comm)), config_(std::move(config)) {
  Comm& c = *comm_;
  const size_t n = static_cast<size_t>(c.size());
  uint64_t placement_key = 0;
  for (int32_t r : config_.placement) placement_key = training::key_of({placement_key, static_cast<uint64_t>(r)});
  static const char* const kField[] = {"refused", "experts", "hidden", "dtype", "expert_rank (the placement)",
                                       "expert_alignment", "fp8_dispatch", "device"};
  constexpr size_t kWords = sizeof kField / sizeof kField[0];
  std::vector<uint64_t> mine(kWords, 0), all(kWords * n);
  if (refused) {
    mine[0] = 1;
  } else {
    mine = {0,
            static_cast<uint64_t>(config_.experts),
            config_.hidden,
            static_cast<uint64_t>(config_.dtype),
            placement_key,
            config_.alignment > 1 ? config_.alignment : 1,
            config_.fp8 ? 1u : 0u,
            config_.device ? 1u : 0u};
  }
  coll::allgather(c, mine.data(), all.data(), kWords, DType::u64);
  if (refused) throw *refused;
  for (size_t r = 0; r < n; ++r) {
    if (all[r * kWords]) {
      fail(Status::mismatch, "weft_moe_create on rank %d: rank %zu refused its config (its error says why)", c.rank(),
           r);
    }
  }
  for (size_t w = 1; w < kWords; ++w) {
    for (size_t r = 0; r < n; ++r) {
      if (all[r * kWords + w] != mine[w]) {
        fail(Status::mismatch, "weft_moe_create: config field %s differs: rank %zu passed %llu, rank %d passed %llu",
             kField[w], r, static_cast<unsigned long long>(all[r * kWords + w]), c.rank(),
             static_cast<unsigned long long>(mine[w]));
      }
    }
  }
}

void Moe::agree(const char* what, const std::optional<Error>& refused) {
  Comm& c = *comm_;
  const int32_t mine = refused ? 1 : 0;
  std::vector<int32_t> all(static_cast<size_t>(c.size()));
  coll::allgather(c, &mine, all.data(), 1, DType::i32);
  if (refused) throw *refused;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r]) {
      fail(Status::remote, "%s on rank %d: rank %zu refused its arguments (its error says why); nothing was exchanged",
           what, c.rank(), r);
    }
  }
}

const unsigned char* Moe::send_tokens(const Handle& h, const void* rows_of, bool fp8,
                                     const std::vector<size_t>& tokens_from) {
  const size_t H = config_.hidden, es = dtype_size(config_.dtype);
  const size_t sent = h.send.send_tokens.size();
  if (!fp8) {
    if (send_buf_.size() < sent * H * es) send_buf_.resize(sent * H * es);
    kernels::gather_rows(send_buf_.data(), rows_of, h.send.send_tokens.data(), sent, H, config_.dtype);
    exchange_rows(*comm_, send_buf_.data(), h.send.tokens_to, tokens_from, H * es, recv_buf_);
    return recv_buf_.data();
  }
  const size_t wire_bytes = sizeof(float) + H;
  std::vector<float> tmp(H);
  if (send_buf_.size() < sent * wire_bytes) send_buf_.resize(sent * wire_bytes);
  const auto* base = static_cast<const unsigned char*>(rows_of);
  for (size_t i = 0; i < sent; ++i) {
    encode_fp8_row(send_buf_.data() + i * wire_bytes, base + static_cast<size_t>(h.send.send_tokens[i]) * H * es, H,
                   config_.dtype, tmp);
  }
  exchange_rows(*comm_, send_buf_.data(), h.send.tokens_to, tokens_from, wire_bytes, wire_buf_);
  const size_t got = total(tokens_from);
  if (recv_buf_.size() < got * H * es) recv_buf_.resize(got * H * es);
  for (size_t i = 0; i < got; ++i) {
    decode_fp8_row(recv_buf_.data() + i * H * es, wire_buf_.data() + i * wire_bytes, H, config_.dtype, tmp);
  }
  return recv_buf_.data();
}

std::unique_ptr<Handle> Moe::plan(const int32_t* indices, const float* weights, size_t tokens, int topk,
                                  std::optional<Error> refused) {
  Comm& c = *comm_;
  const size_t n = static_cast<size_t>(c.size());
  if (!refused) {
    try {
      check_routing(c.rank(), indices, weights, tokens, topk, config_.experts);
    } catch (const Error& e) {
      refused = e;
    }
  }
  auto h = std::make_unique<Handle>();
  h->pool = pool_;
  std::vector<uint64_t> out(3 * n, 0), in(3 * n);
  if (!refused) {
    h->tokens = tokens;
    h->topk = topk;
    h->weights.assign(weights, weights + tokens * static_cast<size_t>(topk));
    h->send = make_send_plan(indices, weights, tokens, topk, c.size(), config_.placement);
    for (size_t r = 0; r < n; ++r) {
      out[3 * r] = h->send.tokens_to[r];
      out[3 * r + 1] = h->send.pairs_to[r];
    }
  } else {
    for (size_t r = 0; r < n; ++r) out[3 * r + 2] = 1;
  }
  // The counts, and the agreement: a refusing rank sends its flag instead of counts.
  coll::alltoall(c, out.data(), in.data(), 3, DType::u64);
  if (refused) throw *refused;
  std::vector<size_t> tokens_from(n), pairs_from(n);
  for (size_t s = 0; s < n; ++s) {
    if (in[3 * s + 2]) {
      fail(Status::remote,
           "weft_moe_dispatch on rank %d: rank %zu refused its input (its error says why); no tokens were exchanged",
           c.rank(), s);
    }
    tokens_from[s] = in[3 * s];
    pairs_from[s] = in[3 * s + 1];
  }
  std::vector<PairMeta> pairs(total(pairs_from));
  {
    std::vector<unsigned char> got;
    exchange_rows(c, reinterpret_cast<const unsigned char*>(h->send.pairs.data()), h->send.pairs_to, pairs_from,
                  sizeof(PairMeta), got);
    if (!got.empty()) std::memcpy(pairs.data(), got.data(), got.size());
  }
  h->recv = make_recv_plan(tokens_from, pairs_from, pairs, c.rank(), config_.placement, config_.alignment);
  return h;
}

std::unique_ptr<Handle> Moe::dispatch(const void* x, const int32_t* indices, const float* weights, size_t tokens,
                                      int topk, std::optional<Error> refused) {
  std::unique_ptr<Handle> h = plan(indices, weights, tokens, topk, std::move(refused));
  const unsigned char* arrived = send_tokens(*h, x, config_.fp8, h->recv.tokens_from);
  const size_t rows = h->recv.rows();
  h->received = pool_->take(rows * config_.hidden * dtype_size(config_.dtype));
  kernels::gather_rows(h->received.data(), arrived, h->recv.gather_index.data(), rows, config_.hidden,
                       config_.dtype);
  return h;
}

void Moe::combine(Handle* hp, const void* expert_out, bool weighted, void* out, const std::optional<Error>& refused) {
  agree("weft_moe_combine", refused);
  Handle& h = *hp;
  const size_t H = config_.hidden, row_bytes = H * dtype_size(config_.dtype);
  const std::vector<int64_t>& back_rows = h.recv.return_row;
  if (send_buf_.size() < back_rows.size() * row_bytes) send_buf_.resize(back_rows.size() * row_bytes);
  kernels::gather_rows(send_buf_.data(), expert_out, back_rows.data(), back_rows.size(), H, config_.dtype);
  // A weighted combine's rows are kept on the handle (combine_backward's grad_weights); the
  // others go through the reused buffer.
  std::vector<unsigned char> kept;
  if (weighted) {
    kept = std::move(h.returned);  // the previous weighted combine's rows: reused, else pooled
    h.has_returned = false;  // until this combine has succeeded
    if (kept.empty()) kept = pool_->take(total(h.send.pairs_to) * row_bytes);
  }
  std::vector<unsigned char>& back = weighted ? kept : back_buf_;
  exchange_rows(*comm_, send_buf_.data(), h.recv.pairs_from, h.send.pairs_to, row_bytes, back);
  kernels::combine_rows(out, back.data(), h.send.slot_row.data(), weighted ? h.weights.data() : nullptr, h.tokens,
                        h.topk, H, config_.dtype);
  if (weighted) {
    h.returned = std::move(kept);
    h.has_returned = true;
  }
}

void Moe::combine_backward(Handle* hp, const void* grad_out, void* grad_expert_out, float* grad_weights,
                           const std::optional<Error>& refused) {
  std::optional<Error> why = refused;
  if (!why && grad_weights && !hp->has_returned) {
    why = Error(Status::invalid_argument,
                format("rank %d: grad_weights needs the expert outputs of a weighted weft_moe_combine on this handle, "
                       "and there was none",
                       comm_->rank()));
  }
  agree("weft_moe_combine_backward", why);
  Handle& h = *hp;
  const unsigned char* arrived = send_tokens(h, grad_out, false, h.recv.tokens_from);
  kernels::scale_gather_rows(grad_expert_out, arrived, h.recv.gather_index.data(), h.recv.row_weight.data(),
                             h.recv.rows(), config_.hidden, config_.dtype);
  if (grad_weights) {
    kernels::dot_rows(grad_weights, grad_out, h.returned.data(), h.send.slot_row.data(), h.tokens, h.topk,
                      config_.hidden, config_.dtype);
  }
}

}  // namespace weft::moe
