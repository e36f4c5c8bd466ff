// cpp_router_cost (README.md): a ROUTER and a COST_MODEL in C++. Every exported function is
// extern "C" and noexcept, and catches everything: an exception must never unwind into weft (C
// frames), so a failure is a nonzero return (the router) or a NaN time (the cost model), which
// weft turns into an error naming this plugin.
#include <weft/plugin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#define CPP_ROUTER_COST_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// ceil(tokens * topk / experts): the room per expert, so that T*k slots fit E experts evenly.
int64_t room(int64_t tokens, int32_t topk, int32_t experts) {
  return (tokens * topk + experts - 1) / experts;
}

// True when expert a's score beats b's: higher first, NaN lowest, ties to the lower index.
bool better(float sa, int32_t a, float sb, int32_t b) {
  const bool na = std::isnan(sa), nb = std::isnan(sb);
  if (na != nb) return nb;
  if (!na && sa != sb) return sa > sb;
  return a < b;
}

void balanced(const float* scores, size_t tokens, int32_t experts, int32_t topk, int32_t* indices) {
  const int64_t cap = room(static_cast<int64_t>(tokens), topk, experts);
  std::vector<int64_t> load(static_cast<size_t>(experts), 0);
  std::vector<char> taken(static_cast<size_t>(experts), 0);
  for (size_t t = 0; t < tokens; ++t) {
    const float* row = scores + t * static_cast<size_t>(experts);
    int32_t* out = indices + t * static_cast<size_t>(topk);
    for (int32_t j = 0; j < topk; ++j) {
      // The best expert with room this token has not taken; when every such expert is full (a
      // late token whose free experts it already holds), the best not taken, room or not.
      int32_t best = -1, best_any = -1;
      for (int32_t e = 0; e < experts; ++e) {
        if (taken[static_cast<size_t>(e)]) continue;
        if (best_any < 0 || better(row[e], e, row[best_any], best_any)) best_any = e;
        if (load[static_cast<size_t>(e)] >= cap) continue;
        if (best < 0 || better(row[e], e, row[best], best)) best = e;
      }
      const int32_t e = best >= 0 ? best : best_any;
      out[j] = e;
      taken[static_cast<size_t>(e)] = 1;
      ++load[static_cast<size_t>(e)];
    }
    for (int32_t j = 0; j < topk; ++j) taken[static_cast<size_t>(out[j])] = 0;
  }
}

}  // namespace

// ROUTER balanced_topk: deterministic (a function of its arguments), as weft requires.
CPP_ROUTER_COST_EXPORT int32_t cpp_router_cost_balanced_topk(const float* scores, size_t tokens, int32_t experts,
                                                             int32_t topk, int32_t* indices) noexcept {
  try {
    if (experts < 1 || topk < 1 || topk > experts || (tokens > 0 && (!scores || !indices))) return 1;
    balanced(scores, tokens, experts, topk, indices);
    return 0;
  } catch (...) {
    return 1;  // WEFT_ERR_INVALID_ARGUMENT's number; only std::bad_alloc can get here
  }
}

// COST_MODEL linear: F = 0.5 + 0.25 * mbs on every stage, B = 2F, I = W = F, REDUCE_GRAD = 0.75
// (time units are the caller's). Anything else is NaN, which weft refuses.
CPP_ROUTER_COST_EXPORT double cpp_router_cost_linear(int32_t action_kind, int32_t stage, int32_t nstages,
                                                     int32_t microbatch, int32_t microbatch_size) noexcept {
  (void)microbatch;
  if (stage < 0 || stage >= nstages || microbatch_size < 1) return std::nan("");
  const double f = 0.5 + 0.25 * microbatch_size;
  switch (action_kind) {
    case 0: return f;        // F
    case 1: return 2 * f;    // B
    case 2:                  // I
    case 3: return f;        // W
    case 8: return 0.75;     // REDUCE_GRAD
    default: return std::nan("");
  }
}

// FUNCTION capacity(I64 tokens, I32 topk, I32 experts) -> I64: balanced_topk's room per expert.
CPP_ROUTER_COST_EXPORT int64_t cpp_router_cost_capacity(int64_t tokens, int32_t topk, int32_t experts) noexcept {
  if (tokens < 0 || topk < 1 || experts < 1) return -1;
  return room(tokens, topk, experts);
}
