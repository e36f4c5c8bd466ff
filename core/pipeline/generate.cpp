// generate(): checks the method's rule (weft/pipeline.h states each), builds the compute order
// (gen_simple.cpp, gen_zero_bubble.cpp, gen_dualpipe.cpp), places the stages, adds REDUCE_GRAD
// when asked and then the SEND/RECV actions (lowering.cpp, or gen_comm.cpp for v > 1). Kinds
// from WEFT_PLUGIN_ID_BASE up are SCHEDULE plugins (gen_plugin.cpp).
#include <cstdint>
#include <string>

#include "core/common/status.h"
#include "core/pipeline/gen_lists.h"
#include "core/pipeline/generators.h"
#include "core/plugin/registry.h"

namespace weft::pipeline {

namespace {

using gen::kMaxActions;
using gen::kMaxMicrobatches;
using gen::kMaxRanks;
using gen::kMaxStagesPerRank;

const char* upper_name(Method m) {
  switch (m) {
    case Method::gpipe: return "GPIPE";
    case Method::one_f_one_b: return "ONE_F_ONE_B";
    case Method::interleaved_1f1b: return "INTERLEAVED_1F1B";
    case Method::zb_h1: return "ZB_H1";
    case Method::zb_h2: return "ZB_H2";
    case Method::zb_v: return "ZB_V";
    case Method::dualpipe_v: return "DUALPIPE_V";
    default: return "CUSTOM";
  }
}

// The method's own v: 2 for the V-shaped placements, else 1.
int own_stages_per_rank(Method m) { return m == Method::zb_v || m == Method::dualpipe_v ? 2 : 1; }

// Throws naming the rule; returns v.
int check_rule(Method method, const GenerateOptions& o) {
  const int mi = static_cast<int>(method);
  if (mi < 0 || mi >= kNumMethods) {
    fail(Status::invalid_argument, "generate: method %d is no generator (expected 0..%d, or a SCHEDULE plugin's id >= %d)",
         mi, kNumMethods - 1, plugin::kIdBase);
  }
  const char* name = upper_name(method);
  const int p = o.ranks, m = o.microbatches;
  if (p < 1 || p > kMaxRanks) fail(Status::invalid_argument, "%s needs 1 <= p <= %d (p = %d)", name, kMaxRanks, p);
  if (m < 1 || m > kMaxMicrobatches) {
    fail(Status::invalid_argument, "%s needs 1 <= m <= %d (m = %d)", name, kMaxMicrobatches, m);
  }
  const int own = own_stages_per_rank(method);
  int v = o.stages_per_rank == 0 ? own : o.stages_per_rank;
  if (method == Method::interleaved_1f1b) {
    if (v < 1 || v > kMaxStagesPerRank) {
      fail(Status::invalid_argument, "INTERLEAVED_1F1B needs 1 <= v <= %d stages per rank (v = %d)", kMaxStagesPerRank, v);
    }
    if (m % p != 0 && m > p) {
      fail(Status::invalid_argument, "INTERLEAVED_1F1B needs m to be a multiple of p or m <= p (m = %d, p = %d)", m, p);
    }
  } else if (v != own) {
    fail(Status::invalid_argument, "%s has v = %d stages per rank: stages_per_rank must be 0 or %d (got %d)", name, own,
         own, o.stages_per_rank);
  }
  if (method == Method::dualpipe_v && m < 2 * p) {
    fail(Status::invalid_argument, "DUALPIPE_V needs m >= 2p (m = %d, p = %d)", m, p);
  }
  if (3LL * v * m * p > kMaxActions) {
    fail(Status::invalid_argument, "%s: p = %d, m = %d, v = %d make %lld compute actions; at most %lld are generated",
         name, p, m, v, 3LL * v * m * p, kMaxActions);
  }
  return v;
}

}  // namespace

// REDUCE_GRAD(s) right after the last backward piece (B or W) of stage s on its rank.
void gen::add_reduce_grad(std::vector<std::vector<Action>>& lists) {
  for (auto& list : lists) {
    std::vector<int> last_index;  // by position: the list index of each stage's last B/W
    std::vector<int> stage_of;
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      if (a.kind != Kind::B && a.kind != Kind::W) continue;
      size_t j = 0;
      while (j < stage_of.size() && stage_of[j] != a.stage) ++j;
      if (j == stage_of.size()) {
        stage_of.push_back(a.stage);
        last_index.push_back(0);
      }
      last_index[j] = static_cast<int>(k);
    }
    std::vector<Action> out;
    out.reserve(list.size() + stage_of.size());
    for (size_t k = 0; k < list.size(); ++k) {
      out.push_back(list[k]);
      for (size_t j = 0; j < stage_of.size(); ++j) {
        if (last_index[j] == static_cast<int>(k)) out.push_back(Action{Kind::REDUCE_GRAD, stage_of[j], -1});
      }
    }
    list = std::move(out);
  }
}

Schedule generate(Method method, const GenerateOptions& o) {
  if (is_plugin_method(method)) {
    Schedule s;
    int32_t declined = 0;
    if (!try_generate_plugin(method, o, &s, &declined)) {
      const Status status = declined >= 1 && declined <= 9 ? static_cast<Status>(declined) : Status::invalid_argument;
      fail(status, "%s failed (returned %d) for p = %d, m = %d, v = %d",
           plugin::get_schedule(static_cast<int>(method))->origin.describe("schedule generator").c_str(),
           static_cast<int>(declined), o.ranks, o.microbatches, o.stages_per_rank == 0 ? 1 : o.stages_per_rank);
    }
    return s;
  }
  const int v = check_rule(method, o);
  const int p = o.ranks, m = o.microbatches;
  Schedule s;
  s.method = method;
  s.ranks = p;
  s.stages = v * p;
  s.microbatches = m;
  s.stage_rank.resize(static_cast<size_t>(s.stages));
  const bool v_shape = method == Method::zb_v || method == Method::dualpipe_v;
  for (int st = 0; st < s.stages; ++st) {
    s.stage_rank[static_cast<size_t>(st)] = v_shape ? gen::v_shape_rank(st, p) : st % p;
  }
  switch (method) {
    case Method::gpipe: s.actions = gen::gpipe(p, m); break;
    case Method::one_f_one_b: s.actions = gen::one_f_one_b(p, m); break;
    case Method::interleaved_1f1b: s.actions = gen::interleaved_1f1b(p, m, v); break;
    case Method::zb_h1: s.actions = gen::zb_h1(p, m); break;
    case Method::zb_h2: s.actions = gen::zb_h2(p, m); break;
    case Method::zb_v: s.actions = gen::zb_v(p, m); break;
    default: s.actions = gen::dualpipe_v(p, m); break;
  }
  if (o.reduce_grad) gen::add_reduce_grad(s.actions);
  // One stage per rank: each pair of neighbours sends one way per direction, and lowering.cpp's
  // placement (a RECV right before its compute, paired with the SEND before it) is deadlock-free.
  // Several stages per rank send both ways between two ranks: gen_comm.cpp orders the exchanges.
  if (v == 1) add_communication(s);
  else gen::place_communication_by_time(s);
  return s;
}

}  // namespace weft::pipeline
