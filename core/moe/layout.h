// Where MoE experts live and how a batch's routing spreads over the ranks (weft/moe.h): the
// placement by torch.chunk's rule or a given map, the routing checks every dispatch makes, and
// weft_moe_layout's counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::moe {

// torch.chunk's rule: c = ceil(E / N); expert e sits on rank e / c, so E need not be a multiple
// of N and the last ranks may hold fewer experts or none.
std::vector<int32_t> chunk_placement(int experts, int nranks);

// The placement: chunk_placement when expert_rank is NULL, else a checked copy of it (every
// entry a rank in [0, nranks); `arg` names the array in messages).
std::vector<int32_t> read_placement(const int32_t* expert_rank, int experts, int nranks, const char* arg);

// Refuses bad routing, naming `rank` (when >= 0) and the first bad token: k outside [1, E], an index outside
// [0, E) other than WEFT_MOE_DROPPED, a NaN weight (weights may be NULL: not checked).
void check_routing(int rank, const int32_t* indices, const float* weights, size_t tokens, int topk, int experts);

// weft_moe_layout's counts (any output may be NULL); indices already checked.
void count_layout(const int32_t* indices, size_t tokens, int topk, int experts, int nranks,
                  const std::vector<int32_t>& placement, int64_t* tokens_per_rank, int64_t* tokens_per_expert,
                  uint8_t* token_in_rank);

}  // namespace weft::moe
