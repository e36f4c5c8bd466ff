// Auto-tuning against brute force and closed forms:
//   - small cases enumerated here from weft_schedule_tune's rules, each generated schedule run
//     through a small simulator written in this file (not core/pipeline/simulator.cpp), the
//     costs split into stages by this file's own code; tune must list the same candidates with
//     the same step times, peaks and fits, sorted, and pick the same best;
//   - 1F1B with a per-micro-batch overhead: step time (m+p-1)(f(m)+b(m)) with f(m) = F0 batch/m + o,
//     so the best m sits inside the range (608 at m = 16 for the case below), as a hand sweep
//     finds it; over every generator ZB-H1's (3m + p - 1) t wins there (540 at m = 4).
// WEFT_TEST_INJECT=1 (ctest unit.pipeline_tune_inject) corrupts every checked result.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/pipeline/generators.h"
#include "core/pipeline/tune.h"
#include "pipeline_inject_checks.h"

namespace wp = weft::pipeline;
using pipecheck::check_value;
using wp::Action;
using wp::Kind;
using wp::Method;

namespace {

struct Small {
  double makespan = 0, peak_bytes = 0;
};

// The model of weft_pipeline_costs_t, written again: ranks run their lists in order; SEND/RECV
// cost nothing; a SEND's message is there at the sender's clock (zero latency here); a compute
// whose input came by a RECV on this rank waits for that message, then takes its cost; F keeps
// bytes until B (or W after I).
Small tiny_simulate(const wp::Schedule& s, const std::vector<double>& f, const std::vector<double>& b, double overhead,
                    const std::vector<double>& act) {
  const size_t p = s.actions.size();
  std::map<std::tuple<bool, int, int>, double> sent;     // (backward, receiving stage, mb) -> time
  std::set<std::tuple<size_t, bool, int, int>> received;  // (rank, backward, stage, mb) received on rank
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0), held(p, 0);
  Small out;
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < p; ++r) {
      const auto& l = s.actions[r];
      while (pc[r] < l.size()) {
        const Action& a = l[pc[r]];
        if (a.kind == Kind::SEND_F) sent[{false, a.stage + 1, a.microbatch}] = clock[r];
        if (a.kind == Kind::SEND_B) sent[{true, a.stage - 1, a.microbatch}] = clock[r];
        if (wp::is_recv(a.kind)) received.insert({r, a.kind == Kind::RECV_B, a.stage, a.microbatch});
        if (wp::is_compute(a.kind)) {
          const bool backward = a.kind == Kind::B || a.kind == Kind::I;
          if (a.kind == Kind::F || backward) {
            if (received.count({r, backward, a.stage, a.microbatch})) {
              const auto it = sent.find({backward, a.stage, a.microbatch});
              if (it == sent.end()) break;  // not sent yet: another rank must move first
              clock[r] = std::max(clock[r], it->second);
            }
          }
          const size_t st = static_cast<size_t>(a.stage);
          double cost = overhead;
          if (a.kind == Kind::F) cost += f[st], held[r] += act[st];
          if (a.kind == Kind::B) cost += b[st], held[r] -= act[st];
          if (a.kind == Kind::I) cost += b[st] / 2;
          if (a.kind == Kind::W) cost += b[st] / 2, held[r] -= act[st];
          out.peak_bytes = std::max(out.peak_bytes, held[r]);
          clock[r] += cost;
        }
        ++pc[r];
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < p; ++r) {
    EXPECT_EQ(pc[r], s.actions[r].size()) << "tiny simulator stuck on rank " << r;
    out.makespan = std::max(out.makespan, clock[r]);
  }
  return out;
}

TEST(PipelineTune, MatchesBruteForce) {
  struct Case {
    int p;
    std::vector<double> lf, lb;
    int batch;
    double overhead, act, cap;
  };
  const Case cases[] = {
      {2, {1, 2, 1, 3}, {2, 3, 2, 5}, 8, 0.25, 10, 0},
      {2, {1, 2, 1, 3}, {2, 3, 2, 5}, 8, 0.25, 10, 150},
      {3, {1, 1, 2, 1, 1, 2}, {2, 2, 4, 2, 2, 4}, 12, 0.5, 1, 20},
      {1, {2, 1}, {3, 3}, 6, 1, 4, 30},
  };
  for (const Case& cs : cases) {
    wp::TuneConfig c;
    c.ranks = cs.p;
    c.layer_forward = cs.lf;
    c.layer_backward = cs.lb;
    c.global_batch = cs.batch;
    c.microbatch_overhead = cs.overhead;
    c.activation_bytes_per_sample = cs.act;
    c.memory_cap = cs.cap;
    c.static_bytes = 3;
    c.max_stages_per_rank = 2;
    const wp::TuneResult got = wp::tune(c);
    const std::string tag = "p=" + std::to_string(cs.p) + " batch=" + std::to_string(cs.batch) + " cap=" +
                            std::to_string(cs.cap);

    // Brute force: every kind, every v in its range, every divisor m that the rule allows.
    std::vector<wp::TuneCandidate> want;
    const int L = static_cast<int>(cs.lf.size());
    for (int k = 0; k < wp::kNumMethods; ++k) {
      const Method kind = static_cast<Method>(k);
      std::vector<int> vs = {1};
      if (kind == Method::interleaved_1f1b) vs = {1, 2};
      if (kind == Method::zb_v || kind == Method::dualpipe_v) vs = {2};
      for (int v : vs) {
        const int S = v * cs.p;
        if (S > L) continue;
        for (int m = 1; m <= cs.batch; ++m) {
          if (cs.batch % m) continue;
          if (kind == Method::interleaved_1f1b && m % cs.p && m > cs.p) continue;
          if (kind == Method::dualpipe_v && m < 2 * cs.p) continue;
          wp::GenerateOptions o;
          o.ranks = cs.p;
          o.microbatches = m;
          o.stages_per_rank = kind == Method::interleaved_1f1b ? v : 0;
          const wp::Schedule s = wp::generate(kind, o);
          const int mbs = cs.batch / m;
          std::vector<double> f(S, 0), b(S, 0), act(S, 0);
          for (int l = 0; l < L; ++l) {
            int st = 0;
            while ((st + 1) * L / S <= l) ++st;  // stage st holds layers [st L / S, (st+1) L / S)
            f[st] += cs.lf[l] * mbs;
            b[st] += cs.lb[l] * mbs;
            act[st] += cs.act * mbs;
          }
          const Small sim = tiny_simulate(s, f, b, cs.overhead, act);
          wp::TuneCandidate w;
          w.kind = kind;
          w.microbatches = m;
          w.stages_per_rank = v;
          w.microbatch_size = mbs;
          w.step_time = sim.makespan;
          w.peak_bytes = sim.peak_bytes + 3;
          w.fits = cs.cap == 0 || w.peak_bytes <= cs.cap;
          want.push_back(w);
        }
      }
    }
    check_value(static_cast<double>(got.candidates.size()), static_cast<double>(want.size()), tag + " candidates");
    for (const wp::TuneCandidate& w : want) {
      const std::string what = tag + " " + wp::method_name(w.kind) + " m=" + std::to_string(w.microbatches) +
                               " v=" + std::to_string(w.stages_per_rank);
      const auto it = std::find_if(got.candidates.begin(), got.candidates.end(), [&](const wp::TuneCandidate& g) {
        return g.kind == w.kind && g.microbatches == w.microbatches && g.stages_per_rank == w.stages_per_rank;
      });
      if (it == got.candidates.end()) {
        ADD_FAILURE() << what << " missing";
        continue;
      }
      check_value(it->step_time, w.step_time, what + " step time", 1e-12);
      check_value(it->peak_bytes, w.peak_bytes, what + " peak bytes", 1e-12);
      check_value(it->fits, w.fits, what + " fits");
      check_value(it->microbatch_size, w.microbatch_size, what + " micro-batch size");
    }
    // Sorted: fitting first, then by step time; best = the fastest fitting one.
    for (size_t k = 1; k < got.candidates.size(); ++k) {
      const auto& a = got.candidates[k - 1];
      const auto& b = got.candidates[k];
      EXPECT_TRUE(a.fits > b.fits || (a.fits == b.fits && a.step_time <= b.step_time)) << tag << " order at " << k;
    }
    double best_time = -1;
    for (const auto& w : want) {
      if (w.fits && (best_time < 0 || w.step_time < best_time)) best_time = w.step_time;
    }
    if (best_time < 0) {
      check_value(got.best, -1, tag + " best (none fits)");
    } else {
      ASSERT_EQ(got.best, 0) << tag;
      check_value(got.candidates[0].step_time, best_time, tag + " best step time", 1e-12);
    }
  }
}

TEST(PipelineTune, OverheadMakesTheBestMicrobatchCountInterior) {
  // p = 4, 8 layers of f = 1, b = 2 per sample, batch 64, overhead 4 per compute action:
  // 1F1B step (m+3)(384/m + 8): m = 1: 1568, 2: 1000, 4: 728, 8: 616, 16: 608, 32: 700, 64: 1072.
  wp::TuneConfig c;
  c.ranks = 4;
  c.layer_forward.assign(8, 1.0);
  c.layer_backward.assign(8, 2.0);
  c.global_batch = 64;
  c.microbatch_overhead = 4;
  c.kinds = {Method::one_f_one_b};
  const wp::TuneResult r = wp::tune(c);
  ASSERT_EQ(r.candidates.size(), 7u);
  for (const auto& cand : r.candidates) {
    const double m = cand.microbatches;
    check_value(cand.step_time, (m + 3) * (384 / m + 8), "1F1B m=" + std::to_string(cand.microbatches) + " step time");
  }
  ASSERT_EQ(r.best, 0);
  check_value(r.candidates[0].microbatches, 16, "best m for 1F1B");
  // Every generator: ZB-H1 (F = I = W = t = 128/m + 4, one overhead per action) takes
  // (3m + 3) t = 540 at m = 4 and m = 8, the least of all here; still an m inside (1, 64).
  c.kinds.clear();
  const wp::TuneResult all = wp::tune(c);
  ASSERT_EQ(all.best, 0);
  check_value(all.candidates[0].step_time, 540, "best step time over every generator");
  EXPECT_EQ(all.candidates[0].kind, Method::zb_h1);
  EXPECT_EQ(all.candidates[0].microbatches, 4);
  const std::string table = wp::format_tune_table(all);
  EXPECT_NE(table.find("1f1b"), std::string::npos) << table;
  EXPECT_EQ(table.find('*'), table.find('\n') + 1) << table;  // the best is the first row
}

TEST(PipelineTune, MemoryCapAndSkippedCandidates) {
  // p = 4, 4 layers: no room for v = 2 (interleaved v >= 2, ZB-V, DualPipeV need 8 layers).
  wp::TuneConfig c;
  c.ranks = 4;
  c.layer_forward.assign(4, 1.0);
  c.layer_backward.assign(4, 2.0);
  c.global_batch = 16;
  c.activation_bytes_per_sample = 1;
  // GPipe holds the whole batch on rank 0 (16 bytes); 1F1B min(4, m) micro-batches of 16/m.
  c.memory_cap = 8;
  const wp::TuneResult r = wp::tune(c);
  for (const auto& cand : r.candidates) {
    const std::string what = std::string(wp::method_name(cand.kind)) + " m=" + std::to_string(cand.microbatches);
    EXPECT_EQ(cand.stages_per_rank, 1) << what;
    EXPECT_NE(cand.kind, Method::zb_v) << what;
    EXPECT_NE(cand.kind, Method::dualpipe_v) << what;
    if (cand.kind == Method::gpipe) check_value(cand.peak_bytes, 16, what + " peak bytes");
    if (cand.kind == Method::one_f_one_b) {
      const double m = cand.microbatches;
      check_value(cand.peak_bytes, std::min(4.0, m) * 16 / m, what + " peak bytes");
      check_value(cand.fits, std::min(4.0, m) * 16 / m <= 8, what + " fits");
    }
  }
  ASSERT_EQ(r.best, 0);
  EXPECT_TRUE(r.candidates[0].fits);
  c.memory_cap = 0.5;  // nothing fits
  check_value(wp::tune(c).best, -1, "best with nothing fitting");
}

TEST(PipelineTune, RefusesBadConfig) {
  wp::TuneConfig c;
  c.layer_forward = {1, 1};
  c.layer_backward = {1};
  EXPECT_THROW(wp::tune(c), weft::Error);
  c.layer_backward = {1, 1};
  c.ranks = 0;
  EXPECT_THROW(wp::tune(c), weft::Error);
  c.ranks = 1;
  c.kinds = {static_cast<Method>(11)};
  try {
    wp::tune(c);
    ADD_FAILURE() << "kind 11 accepted";
  } catch (const weft::Error& e) {
    EXPECT_NE(e.message().find("kinds[0] = 11"), std::string::npos) << e.message();
  }
}

}  // namespace
