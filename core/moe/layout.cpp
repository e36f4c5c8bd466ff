#include "core/moe/layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/common/status.h"

namespace weft::moe {

std::vector<int32_t> chunk_placement(int experts, int nranks) {
  std::vector<int32_t> p(static_cast<size_t>(experts));
  const int c = (experts + nranks - 1) / nranks;
  for (int e = 0; e < experts; ++e) p[static_cast<size_t>(e)] = e / c;
  return p;
}

std::vector<int32_t> read_placement(const int32_t* expert_rank, int experts, int nranks, const char* arg) {
  if (experts < 1) fail(Status::invalid_argument, "experts = %d; expected at least 1", experts);
  if (nranks < 1) fail(Status::invalid_argument, "nranks = %d; expected at least 1", nranks);
  if (!expert_rank) return chunk_placement(experts, nranks);
  std::vector<int32_t> p(expert_rank, expert_rank + experts);
  for (int e = 0; e < experts; ++e) {
    if (p[static_cast<size_t>(e)] < 0 || p[static_cast<size_t>(e)] >= nranks) {
      fail(Status::invalid_argument, "%s[%d] = %d; expected a rank in [0, %d)", arg, e, p[static_cast<size_t>(e)],
           nranks);
    }
  }
  return p;
}

void check_routing(int rank, const int32_t* indices, const float* weights, size_t tokens, int topk, int experts) {
  const std::string who = rank >= 0 ? format("rank %d: ", rank) : std::string();
  if (topk < 1 || topk > experts) {
    fail(Status::invalid_argument, "%stopk = %d; expected 1 <= k <= experts (%d)", who.c_str(), topk, experts);
  }
  if (tokens && !indices) fail(Status::invalid_argument, "%sindices is NULL with %zu tokens", who.c_str(), tokens);
  const size_t k = static_cast<size_t>(topk);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t j = 0; j < k; ++j) {
      const int32_t e = indices[t * k + j];
      if (e != -1 && (e < 0 || e >= experts)) {
        fail(Status::invalid_argument,
             "%sindices[token %zu, slot %zu] = %d; expected an expert in [0, %d) or WEFT_MOE_DROPPED (-1)", who.c_str(),
             t, j, e, experts);
      }
      if (weights && std::isnan(weights[t * k + j])) {
        fail(Status::invalid_argument, "%sweights[token %zu, slot %zu] is NaN; expected a number", who.c_str(), t,
             j);
      }
    }
  }
}

void count_layout(const int32_t* indices, size_t tokens, int topk, int experts, int nranks,
                  const std::vector<int32_t>& placement, int64_t* tokens_per_rank, int64_t* tokens_per_expert,
                  uint8_t* token_in_rank) {
  const size_t n = static_cast<size_t>(nranks), k = static_cast<size_t>(topk);
  if (tokens_per_rank) std::memset(tokens_per_rank, 0, n * sizeof(int64_t));
  if (tokens_per_expert) std::memset(tokens_per_expert, 0, static_cast<size_t>(experts) * sizeof(int64_t));
  std::vector<uint8_t> hit(n);
  for (size_t t = 0; t < tokens; ++t) {
    std::fill(hit.begin(), hit.end(), uint8_t{0});
    for (size_t j = 0; j < k; ++j) {
      const int32_t e = indices[t * k + j];
      if (e < 0) continue;
      if (tokens_per_expert) ++tokens_per_expert[e];
      hit[static_cast<size_t>(placement[static_cast<size_t>(e)])] = 1;
    }
    for (size_t r = 0; r < n; ++r) {
      if (tokens_per_rank) tokens_per_rank[r] += hit[r];
      if (token_in_rank) token_in_rank[t * n + r] = hit[r];
    }
  }
}

}  // namespace weft::moe
