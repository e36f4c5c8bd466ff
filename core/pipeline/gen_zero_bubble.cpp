// The zero-bubble family (Qi et al., "Zero Bubble Pipeline Parallelism"): each backward split in
// I (input gradient, on the critical path) and W (weight gradient, free to move into bubbles).
//   ZB-H1: written out: 1F1B's order with B split, rank r deferring its W's by r micro-batches.
//   ZB-H2, ZB-V: a greedy list scheduler in unit time (F = I = W = 1) with per-rank caps on the
//   micro-batches in flight.
// "Held" below means F done and W not yet done: the unit the simulator counts activations in.
#include <algorithm>
#include <set>

#include "core/common/status.h"
#include "core/pipeline/gen_lists.h"

namespace weft::pipeline::gen {

// Rank r: min(p-1-r, m) warm-up forwards as 1F1B; then per micro-batch k a forward (while any
// are left), I(k) and, from k = r on, the oldest W left; then the W's left. Deferring r W's
// lets the later ranks send their I's down the pipe early and fill the cool-down with W's: with
// F = I = W = t and m >= p the makespan is 3mt + (p-1)t, which no v = 1 schedule can beat (rank
// p-1 cannot start before (p-1)t and has 3mt of work). Rank r holds at most (p-r) + r = p
// micro-batches: 1F1B's peak on rank 0.
Lists zb_h1(int p, int m) {
  Lists lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto& l = lists[static_cast<size_t>(r)];
    const int warmup = std::min(p - 1 - r, m);
    int next_f = 0, next_w = 0;
    while (next_f < warmup) l.push_back(Action{Kind::F, r, next_f++});
    for (int k = 0; k < m; ++k) {
      if (next_f < m) l.push_back(Action{Kind::F, r, next_f++});
      l.push_back(Action{Kind::I, r, k});
      if (k >= r) l.push_back(Action{Kind::W, r, next_w++});
    }
    while (next_w < m) l.push_back(Action{Kind::W, r, next_w++});
  }
  return lists;
}

namespace {

// The greedy list scheduler. At each unit step every rank starts one action that is ready at the
// step's start, chosen by (priority of its kind, micro-batch, deeper stage first):
//   I(s, i): F(s, i) done and I(s+1, i) done (or s last);
//   F(s, i): the next forward of s, F(s-1, i) done (or s first), under the rank's caps;
//   W(s, i): the lowest micro-batch of s whose I is done and W not.
// Deterministic: nothing depends on anything but p, m, the caps and the priorities.
struct Greedy {
  int p, m, stages;
  std::vector<int> stage_rank;  // [stage]
  std::vector<int> cap_fwd;     // [rank] micro-batches with F done and I not
  std::vector<int> cap_held;    // [rank] micro-batches with F done and W not
  int prio_i = 0, prio_f = 1, prio_w = 2;
};

struct GreedyResult {
  Lists lists;
  long makespan = 0;
};

GreedyResult run_greedy(const Greedy& g) {
  const size_t S = static_cast<size_t>(g.stages), M = static_cast<size_t>(g.m);
  std::vector<std::vector<char>> f_done(S, std::vector<char>(M, 0)), i_done(S, std::vector<char>(M, 0));
  std::vector<int> next_f(S, 0);
  std::vector<std::set<int>> pend_i(S), pend_w(S);  // ascending micro-batches
  std::vector<int> fwd(static_cast<size_t>(g.p), 0), held(static_cast<size_t>(g.p), 0);
  std::vector<std::vector<int>> rank_stages(static_cast<size_t>(g.p));
  for (int s = 0; s < g.stages; ++s) rank_stages[static_cast<size_t>(g.stage_rank[static_cast<size_t>(s)])].push_back(s);

  GreedyResult res;
  res.lists.resize(static_cast<size_t>(g.p));
  const long total = 3L * g.stages * g.m;
  long placed = 0;
  struct Pick {
    long key[3];
    Action a;
  };
  std::vector<Pick> picks;
  while (placed < total) {
    picks.clear();
    for (int r = 0; r < g.p; ++r) {
      bool have = false;
      Pick best{};
      auto offer = [&](int prio, Kind k, int s, int i) {
        const Pick c{{prio, i, -s}, Action{k, s, i}};
        if (!have || std::lexicographical_compare(c.key, c.key + 3, best.key, best.key + 3)) best = c;
        have = true;
      };
      const size_t ru = static_cast<size_t>(r);
      for (int s : rank_stages[ru]) {
        const size_t su = static_cast<size_t>(s);
        for (int i : pend_i[su]) {
          if (s == g.stages - 1 || i_done[su + 1][static_cast<size_t>(i)]) {
            offer(g.prio_i, Kind::I, s, i);
            break;
          }
        }
        const int i = next_f[su];
        if (i < g.m && fwd[ru] < g.cap_fwd[ru] && held[ru] < g.cap_held[ru] &&
            (s == 0 || f_done[su - 1][static_cast<size_t>(i)])) {
          offer(g.prio_f, Kind::F, s, i);
        }
        if (!pend_w[su].empty()) offer(g.prio_w, Kind::W, s, *pend_w[su].begin());
      }
      if (have) {
        best.key[0] = r;  // reused: the rank that picked it
        picks.push_back(best);
      }
    }
    if (picks.empty()) {
      fail(Status::internal, "zero-bubble generator: no rank can start an action at step %ld (p = %d, m = %d)",
           res.makespan, g.p, g.m);
    }
    for (const Pick& pk : picks) {
      const size_t r = static_cast<size_t>(pk.key[0]), s = static_cast<size_t>(pk.a.stage);
      const int i = pk.a.microbatch;
      res.lists[r].push_back(pk.a);
      ++placed;
      if (pk.a.kind == Kind::F) {
        f_done[s][static_cast<size_t>(i)] = 1;
        ++next_f[s];
        ++fwd[r];
        ++held[r];
        pend_i[s].insert(i);
      } else if (pk.a.kind == Kind::I) {
        i_done[s][static_cast<size_t>(i)] = 1;
        --fwd[r];
        pend_i[s].erase(i);
        pend_w[s].insert(i);
      } else {
        --held[r];
        pend_w[s].erase(i);
      }
    }
    ++res.makespan;
  }
  return res;
}

}  // namespace

// ZB-H2: up to 2(p-r)-1 forwards in flight on rank r (and 2p-1 held), so that the warm-up
// bubble fills with extra forwards. With F = I = W = t and m >= p the makespan is 3mt + (p-1)t,
// the v = 1 bound (see zb_h1). With W < F it gains over ZB-H1: for m >= 2p-1 its bubble is the
// paper's (p-1)(F+I-2W), or (p-1)F where that is more, against ZB-H1's (p-1)(F+I-W).
Lists zb_h2(int p, int m) {
  Greedy g{p, m, p, {}, {}, {}};
  for (int s = 0; s < p; ++s) g.stage_rank.push_back(s);
  for (int r = 0; r < p; ++r) {
    g.cap_fwd.push_back(2 * (p - r) - 1);
    g.cap_held.push_back(2 * p - 1);
  }
  return run_greedy(g).lists;
}

// ZB-V: stages r and 2p-1-r on rank r; every rank holds at most 2p chunk activations (each half
// a 1F1B stage's, so 1F1B's rank-0 peak in bytes). Two priority orders are tried, I > F > W and
// F > I > W, and the shorter unit-time schedule kept (the first on a tie): with F = I = W = 1 per
// chunk it reaches 6m + p - 1 for m >= p (the bound: rank p-1 starts at p-1 with 6m of work)
// except a few m just above p on p >= 5 (tests/unit/test_pipeline_simulator.cpp lists them).
Lists zb_v(int p, int m) {
  Greedy g{p, m, 2 * p, {}, {}, {}};
  for (int s = 0; s < 2 * p; ++s) g.stage_rank.push_back(v_shape_rank(s, p));
  g.cap_fwd.assign(static_cast<size_t>(p), 2 * p);
  g.cap_held.assign(static_cast<size_t>(p), 2 * p);
  GreedyResult a = run_greedy(g);
  g.prio_f = 0;
  g.prio_i = 1;
  GreedyResult b = run_greedy(g);
  return b.makespan < a.makespan ? std::move(b.lists) : std::move(a.lists);
}

}  // namespace weft::pipeline::gen
