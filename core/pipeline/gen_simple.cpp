// GPipe, 1F1B and interleaved 1F1B: fixed orders written out per rank (stage s on rank s mod p).
#include <algorithm>

#include "core/pipeline/gen_lists.h"

namespace weft::pipeline::gen {

namespace {

Action act(Kind k, int stage, int mb) { return Action{k, stage, mb}; }

}  // namespace

// All forwards in micro-batch order, then all backwards in micro-batch order: rank r holds all m
// activations at once.
Lists gpipe(int p, int m) {
  Lists lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto& l = lists[static_cast<size_t>(r)];
    for (int i = 0; i < m; ++i) l.push_back(act(Kind::F, r, i));
    for (int i = 0; i < m; ++i) l.push_back(act(Kind::B, r, i));
  }
  return lists;
}

// Rank r warms up with min(p-1-r, m) forwards, so that its first backward's gradient is on its way
// when it finishes the next forward; then one forward and one backward in turn; then the
// backwards left. With m < p the warm-up is all of m and the lists stay consistent (each rank's
// forwards come before the backwards they feed), which is where torch's 1F1B hangs.
Lists one_f_one_b(int p, int m) {
  Lists lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto& l = lists[static_cast<size_t>(r)];
    const int warmup = std::min(p - 1 - r, m);
    for (int i = 0; i < warmup; ++i) l.push_back(act(Kind::F, r, i));
    for (int i = 0; i < m - warmup; ++i) {
      l.push_back(act(Kind::F, r, warmup + i));
      l.push_back(act(Kind::B, r, i));
    }
    for (int i = m - warmup; i < m; ++i) l.push_back(act(Kind::B, r, i));
  }
  return lists;
}

// Megatron's interleaved order with v chunks per rank (chunk c of rank r is stage c*p + r). Work
// goes in groups of g micro-batches (g = p, or g = m when m < p: one round): the k-th forward of
// a rank is chunk (k / g) % v of micro-batch (k / (g v)) g + k % g; the k-th backward the same
// with the chunks reversed. Warm-up: 2(p-1-r) + (v-1) g forwards (capped at v m), Megatron's
// count: the forwards rank r runs before the first gradient of its last chunk comes back. v = 1
// is 1F1B (warm-up p-1-r), as Megatron runs it without interleaving.
Lists interleaved_1f1b(int p, int m, int v) {
  if (v == 1) return one_f_one_b(p, m);
  const int g = m % p == 0 ? p : m;
  const int total = v * m;
  Lists lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto fwd = [&](int k) { return act(Kind::F, ((k / g) % v) * p + r, (k / (g * v)) * g + k % g); };
    auto bwd = [&](int k) { return act(Kind::B, (v - 1 - (k / g) % v) * p + r, (k / (g * v)) * g + k % g); };
    auto& l = lists[static_cast<size_t>(r)];
    const int warmup = std::min(2 * (p - 1 - r) + (v - 1) * g, total);
    for (int k = 0; k < warmup; ++k) l.push_back(fwd(k));
    for (int k = 0; k < total - warmup; ++k) {
      l.push_back(fwd(warmup + k));
      l.push_back(bwd(k));
    }
    for (int k = total - warmup; k < total; ++k) l.push_back(bwd(k));
  }
  return lists;
}

}  // namespace weft::pipeline::gen
