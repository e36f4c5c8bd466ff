#include "core/moe/plan.h"

#include <numeric>

#include "core/common/status.h"

namespace weft::moe {

SendPlan make_send_plan(const int32_t* indices, const float* weights, size_t tokens, int topk, int nranks,
                        const std::vector<int32_t>& placement) {
  const size_t n = static_cast<size_t>(nranks), k = static_cast<size_t>(topk);
  SendPlan p;
  p.tokens_to.assign(n, 0);
  p.pairs_to.assign(n, 0);
  p.slot_row.assign(tokens * k, -1);
  // One pass per destination keeps the buffers destination-major without a sort; N <= a few
  // dozen and T * k is small next to the T * H rows moved afterwards.
  for (size_t r = 0; r < n; ++r) {
    for (size_t t = 0; t < tokens; ++t) {
      bool sent = false;
      for (size_t j = 0; j < k; ++j) {
        const int32_t e = indices[t * k + j];
        if (e < 0 || static_cast<size_t>(placement[static_cast<size_t>(e)]) != r) continue;
        if (!sent) {
          p.send_tokens.push_back(static_cast<int64_t>(t));
          ++p.tokens_to[r];
          sent = true;
        }
        p.slot_row[t * k + j] = static_cast<int64_t>(p.pairs.size());
        p.pairs.push_back(PairMeta{static_cast<int64_t>(t), static_cast<int32_t>(j), e, weights[t * k + j], 0});
        ++p.pairs_to[r];
      }
    }
  }
  return p;
}

RecvPlan make_recv_plan(const std::vector<size_t>& tokens_from, const std::vector<size_t>& pairs_from,
                        const std::vector<PairMeta>& pairs, int rank, const std::vector<int32_t>& placement,
                        size_t alignment) {
  const size_t n = tokens_from.size();
  RecvPlan p;
  p.tokens_from = tokens_from;
  p.pairs_from = pairs_from;
  std::vector<int> local_of(placement.size(), -1);
  for (size_t e = 0; e < placement.size(); ++e) {
    if (placement[e] == rank) {
      local_of[e] = static_cast<int>(p.experts.size());
      p.experts.push_back(static_cast<int32_t>(e));
    }
  }
  const size_t L = p.experts.size();
  // The receive-buffer row of each pair: a source's tokens arrive ascending, its pairs ascending
  // by token, so one walk per source matches them.
  std::vector<int64_t> pair_row(pairs.size());
  size_t pair_base = 0, token_base = 0;
  for (size_t s = 0; s < n; ++s) {
    size_t ti = 0;
    int64_t current = -1;
    for (size_t q = 0; q < pairs_from[s]; ++q) {
      const PairMeta& m = pairs[pair_base + q];
      if (m.token != current) {
        if (current >= 0) ++ti;
        current = m.token;
      }
      if (ti >= tokens_from[s] || m.expert < 0 || static_cast<size_t>(m.expert) >= placement.size() ||
          local_of[static_cast<size_t>(m.expert)] < 0) {
        fail(Status::internal, "rank %d: the pairs from rank %zu do not match its %zu tokens (pair %zu, expert %d)",
             rank, s, tokens_from[s], q, m.expert);
      }
      pair_row[pair_base + q] = static_cast<int64_t>(token_base + ti);
    }
    pair_base += pairs_from[s];
    token_base += tokens_from[s];
  }
  // Expert-major: for each local expert, every pair for it in arrival order, which is already
  // source rank, then token, then slot.
  std::vector<std::vector<size_t>> of_expert(L);
  for (size_t q = 0; q < pairs.size(); ++q) of_expert[static_cast<size_t>(local_of[static_cast<size_t>(pairs[q].expert)])].push_back(q);
  std::vector<int32_t> source_of(pairs.size());
  pair_base = 0;
  for (size_t s = 0; s < n; ++s) {
    for (size_t q = 0; q < pairs_from[s]; ++q) source_of[pair_base + q] = static_cast<int32_t>(s);
    pair_base += pairs_from[s];
  }
  p.counts.resize(L);
  p.offsets.assign(L + 1, 0);
  p.return_row.assign(pairs.size(), -1);
  const size_t align = alignment > 1 ? alignment : 1;
  for (size_t l = 0; l < L; ++l) {
    p.offsets[l] = static_cast<int64_t>(p.gather_index.size());
    p.counts[l] = static_cast<int64_t>(of_expert[l].size());
    for (size_t q : of_expert[l]) {
      p.return_row[q] = static_cast<int64_t>(p.gather_index.size());
      p.gather_index.push_back(pair_row[q]);
      p.row_expert.push_back(pairs[q].expert);
      p.row_weight.push_back(pairs[q].weight);
      p.row_source_rank.push_back(source_of[q]);
      p.row_source_token.push_back(pairs[q].token);
    }
    while (p.gather_index.size() % align) {
      p.gather_index.push_back(-1);
      p.row_expert.push_back(-1);
      p.row_weight.push_back(0.0f);
      p.row_source_rank.push_back(-1);
      p.row_source_token.push_back(-1);
    }
  }
  p.offsets[L] = static_cast<int64_t>(p.gather_index.size());
  return p;
}

}  // namespace weft::moe
