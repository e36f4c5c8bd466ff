// SCHEDULE plugins (weft/plugin.h, weft_plugin_schedule_fn): a plugin writes every rank's
// compute-only list and the placement; weft checks what it wrote before it trusts any of it
// (counts within the buffer, compute kinds only, stages and micro-batches in range, a placement
// that gives every rank v stages), then builds the schedule as the built-in generators do
// (REDUCE_GRAD on request, SEND/RECV inserted) and validates it. Every message names the plugin.
#include <cstdint>
#include <string>
#include <vector>

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

[[noreturn]] void refuse(const std::string& who, int p, int m, int v, const std::string& why) {
  fail(Status::invalid_argument, "%s, p = %d, m = %d, v = %d: %s", who.c_str(), p, m, v, why.c_str());
}

// The plugin's placement: every stage on a rank in [0, p), every rank holding exactly v stages.
void check_placement(const std::vector<int32_t>& stage_rank, int p, int v, const std::string& who, int m) {
  std::vector<int> held(static_cast<size_t>(p), 0);
  for (size_t s = 0; s < stage_rank.size(); ++s) {
    const int r = stage_rank[s];
    if (r < 0 || r >= p) {
      refuse(who, p, m, v, format("stage_rank[%zu] = %d; expected a rank in [0, %d)", s, r, p));
    }
    ++held[static_cast<size_t>(r)];
  }
  for (int r = 0; r < p; ++r) {
    if (held[static_cast<size_t>(r)] != v) {
      refuse(who, p, m, v, format("stage_rank places %d stages on rank %d; expected v = %d on every rank",
                                  held[static_cast<size_t>(r)], r, v));
    }
  }
}

// The plugin's lists: compute kinds only, stages in [0, S), micro-batches in [0, m) (REDUCE_GRAD: -1).
void check_action(const Action& a, size_t r, size_t k, int S, int m, const std::string& who, int p, int v) {
  const int kind = static_cast<int>(a.kind);
  if (kind < 0 || kind >= kNumKinds || !is_compute(a.kind)) {
    refuse(who, p, m, v, format("rank %zu, action %zu: kind %d; expected a compute kind (F, B, I, W, REDUCE_GRAD): "
                                "weft inserts the SEND/RECV actions itself", r, k, kind));
  }
  const std::string text = to_string(a);
  if (a.stage < 0 || a.stage >= S) {
    refuse(who, p, m, v, format("rank %zu, action %zu (%s): stage %d; expected [0, %d)", r, k, text.c_str(), a.stage, S));
  }
  const bool reduce = a.kind == Kind::REDUCE_GRAD;
  if (reduce ? a.microbatch != -1 : (a.microbatch < 0 || a.microbatch >= m)) {
    refuse(who, p, m, v, format("rank %zu, action %zu (%s): micro-batch %d; expected %s", r, k, text.c_str(),
                                a.microbatch, reduce ? "-1 for REDUCE_GRAD" : format("[0, %d)", m).c_str()));
  }
}

}  // namespace

bool is_plugin_method(Method m) { return static_cast<int>(m) >= plugin::kIdBase; }

const char* plugin_method_name(Method m) {
  // The registry keeps every generator for the life of the process, so the name's storage stays.
  const auto g = plugin::find_schedule(static_cast<int>(m));
  return g ? g->origin.name.c_str() : "unregistered-plugin";
}

bool try_generate_plugin(Method method, const GenerateOptions& o, Schedule* out, int32_t* declined) {
  const auto gen = plugin::get_schedule(static_cast<int>(method));
  const std::string who = gen->origin.describe("schedule generator");
  const int p = o.ranks, m = o.microbatches, v = o.stages_per_rank == 0 ? 1 : o.stages_per_rank;
  if (p < 1 || p > kMaxRanks) refuse(who, p, m, v, format("needs 1 <= p <= %d", kMaxRanks));
  if (m < 1 || m > kMaxMicrobatches) refuse(who, p, m, v, format("needs 1 <= m <= %d", kMaxMicrobatches));
  if (v < 1 || v > kMaxStagesPerRank) refuse(who, p, m, v, format("needs 1 <= v <= %d", kMaxStagesPerRank));
  if (3LL * v * m * p > kMaxActions) refuse(who, p, m, v, format("more than %lld compute actions", kMaxActions));
  const int S = p * v;
  // Room for every compute action a schedule can have (F and B, or F, I and W, per stage and
  // micro-batch) and a REDUCE_GRAD per stage.
  const size_t capacity = static_cast<size_t>(p) * (3 * static_cast<size_t>(v) * static_cast<size_t>(m) +
                                                    static_cast<size_t>(v));
  std::vector<Action> actions(capacity, Action{Kind::F, -1, -1});
  std::vector<size_t> counts(static_cast<size_t>(p), 0);
  std::vector<int32_t> stage_rank(static_cast<size_t>(S), -1);
  // pipeline::Action is weft_action_t's layout (capi/src/pipeline_handles.cpp static_asserts it).
  const int32_t ret = gen->generate(p, m, v, actions.data(), capacity, counts.data(), stage_rank.data());
  if (ret != 0) {
    if (declined) *declined = ret;
    return false;
  }
  size_t total = 0;
  for (int r = 0; r < p; ++r) {
    const size_t n = counts[static_cast<size_t>(r)];
    if (n > capacity - total) {
      refuse(who, p, m, v, format("counts[%d] = %zu brings the lists past the buffer's %zu actions", r, n, capacity));
    }
    total += n;
  }
  check_placement(stage_rank, p, v, who, m);
  Schedule s;
  s.method = method;
  s.ranks = p;
  s.stages = S;
  s.microbatches = m;
  s.stage_rank.assign(stage_rank.begin(), stage_rank.end());
  s.actions.resize(static_cast<size_t>(p));
  size_t at = 0;
  for (size_t r = 0; r < static_cast<size_t>(p); ++r) {
    for (size_t k = 0; k < counts[r]; ++k, ++at) {
      const Action& a = actions[at];
      check_action(a, r, k, S, m, who, p, v);
      // REDUCE_GRAD on request is weft's (as for the built-ins): the plugin's own are replaced.
      if (o.reduce_grad && a.kind == Kind::REDUCE_GRAD) continue;
      s.actions[r].push_back(a);
    }
  }
  if (o.reduce_grad) gen::add_reduce_grad(s.actions);
  try {
    // As generate(): one stage per rank lowers simply; several need the global message order.
    if (v == 1) add_communication(s);
    else gen::place_communication_by_time(s);
    validate(s);
  } catch (const Error& e) {
    refuse(who, p, m, v, std::string("the schedule it wrote is invalid: ").append(e.what()));
  }
  *out = std::move(s);
  return true;
}

}  // namespace weft::pipeline
