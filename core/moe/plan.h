// The per-batch plan of a dispatch (weft/moe.h): which of this rank's tokens go to which rank
// (each token once per destination), the (token, slot) pairs that travel with them, and, on the
// receiving side, the expert-major rows made from what arrived. Combine and the backward passes
// reuse it, so each is one exchange plus one row kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::moe {

// One (token, slot) assignment as it travels to the rank holding its expert: the source token
// index, its slot, the global expert and the routing weight.
struct PairMeta {
  int64_t token;
  int32_t slot;
  int32_t expert;
  float weight;
  int32_t reserved;  // zero; keeps the record a multiple of 8 bytes
};
static_assert(sizeof(PairMeta) == 24);

// The source side. Destination-major: tokens for rank 0 first (ascending token), then rank 1...
struct SendPlan {
  std::vector<int64_t> send_tokens;   // the token index of each sent row
  std::vector<size_t> tokens_to;      // [N] rows sent to each rank
  std::vector<PairMeta> pairs;        // the pairs, destination-major, then token, then slot
  std::vector<size_t> pairs_to;       // [N] pairs sent to each rank
  // [T * k]: where combine's answer for (t, j) lands in the buffer received back (pairs come
  // back in the order they were sent), -1 for a dropped slot.
  std::vector<int64_t> slot_row;
};

SendPlan make_send_plan(const int32_t* indices, const float* weights, size_t tokens, int topk, int nranks,
                        const std::vector<int32_t>& placement);

// The expert side, built from the counts and pairs that arrived.
struct RecvPlan {
  std::vector<size_t> tokens_from;  // [N] token rows received from each rank
  std::vector<size_t> pairs_from;   // [N] pairs received from each rank
  std::vector<int32_t> experts;     // local experts, index order
  std::vector<int64_t> counts;      // [L] rows per local expert
  std::vector<int64_t> offsets;     // [L + 1] start of each expert's block (padded)
  // [rows]: per expert-major row, the row of the receive buffer it copies (-1: padding), and
  // what weft_moe_received_t reports.
  std::vector<int64_t> gather_index;
  std::vector<int32_t> row_expert;
  std::vector<float> row_weight;
  std::vector<int32_t> row_source_rank;
  std::vector<int64_t> row_source_token;
  // Combine sends pair p of source rank s (in the order s sent it) from expert-major row
  // return_row[pair offset of s + p]: the order the source expects its answers in.
  std::vector<int64_t> return_row;
  size_t rows() const { return gather_index.size(); }
};

// pairs: everything received, source-major, each source's pairs in its send order. rank: this
// rank (for the local experts); alignment 0 or 1 = no padding.
RecvPlan make_recv_plan(const std::vector<size_t>& tokens_from, const std::vector<size_t>& pairs_from,
                        const std::vector<PairMeta>& pairs, int rank, const std::vector<int32_t>& placement,
                        size_t alignment);

}  // namespace weft::moe
