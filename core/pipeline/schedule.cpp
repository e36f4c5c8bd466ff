// The schedule IR's small functions: torch's action strings, the method names, and make_schedule
// (weft_schedule_create's rules, weft/pipeline.h).
#include "core/pipeline/schedule.h"

#include <algorithm>

#include "core/common/status.h"
#include "core/pipeline/gen_lists.h"

namespace weft::pipeline {

namespace {

constexpr const char* kKindNames[kNumKinds] = {"F",      "B",      "I",      "W",          "SEND_F",
                                               "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD"};
constexpr const char* kMethodNames[kNumMethods] = {"gpipe", "1f1b", "interleaved", "zbh1", "zbh2", "zbv", "dualpipev"};

}  // namespace

const char* kind_name(Kind k) {
  const int i = static_cast<int>(k);
  return i >= 0 && i < kNumKinds ? kKindNames[i] : "?";
}

std::string to_string(const Action& a) {
  std::string s = std::to_string(a.stage);
  s.append(kind_name(a.kind));
  // torch writes REDUCE_GRAD without a micro-batch ("2REDUCE_GRAD").
  if (a.kind != Kind::REDUCE_GRAD) s.append(std::to_string(a.microbatch));
  return s;
}

const char* method_name(Method m) {
  const int i = static_cast<int>(m);
  if (m == Method::custom) return "custom";
  if (is_plugin_method(m)) return plugin_method_name(m);
  return i >= 0 && i < kNumMethods ? kMethodNames[i] : "?";
}

bool method_from_name(const std::string& name, Method* out) {
  for (int i = 0; i < kNumMethods; ++i) {
    if (name == kMethodNames[i]) {
      if (out) *out = static_cast<Method>(i);
      return true;
    }
  }
  return false;
}

int Schedule::stages_per_rank() const {
  std::vector<int> held(static_cast<size_t>(std::max(ranks, 0)), 0);
  for (int r : stage_rank) {
    if (r >= 0 && r < ranks) ++held[static_cast<size_t>(r)];
  }
  return held.empty() ? 0 : *std::max_element(held.begin(), held.end());
}

bool Schedule::has_comm() const {
  for (const auto& list : actions) {
    for (const Action& a : list) {
      if (is_comm(a.kind)) return true;
    }
  }
  return false;
}

Schedule make_schedule(std::vector<std::vector<Action>> lists, Method method) {
  const int m = static_cast<int>(method);
  if (m < static_cast<int>(Method::custom) || (m >= kNumMethods && !is_plugin_method(method))) {
    fail(Status::invalid_argument, "method %d is not a schedule method (-1 for custom, 0..%d, a plugin's >= 64)", m,
         kNumMethods - 1);
  }
  if (lists.empty()) fail(Status::invalid_argument, "a schedule needs at least one rank; got 0 lists");
  if (lists.size() > static_cast<size_t>(1 << 20)) {
    fail(Status::invalid_argument, "%zu rank lists; at most %d ranks are supported", lists.size(), 1 << 20);
  }
  size_t total = 0;
  for (const auto& l : lists) total += l.size();

  int max_stage = -1, max_mb = -1;
  bool any_f = false;
  for (size_t r = 0; r < lists.size(); ++r) {
    for (size_t k = 0; k < lists[r].size(); ++k) {
      const Action& a = lists[r][k];
      const int kind = static_cast<int>(a.kind);
      if (kind < 0 || kind >= kNumKinds) {
        fail(Status::invalid_argument, "rank %zu, action %zu: kind %d is not an action kind (0..%d)", r, k, kind,
             kNumKinds - 1);
      }
      const std::string text = to_string(a);
      if (a.stage < 0) {
        fail(Status::invalid_argument, "rank %zu, action %zu (%s): stage %d is negative", r, k, text.c_str(), a.stage);
      }
      if (a.kind == Kind::REDUCE_GRAD) {
        if (a.microbatch != -1) {
          fail(Status::invalid_argument, "rank %zu, action %zu (%s): REDUCE_GRAD takes micro-batch -1, not %d", r, k,
               text.c_str(), a.microbatch);
        }
      } else if (a.microbatch < 0) {
        fail(Status::invalid_argument, "rank %zu, action %zu (%s): micro-batch %d is negative", r, k, text.c_str(),
             a.microbatch);
      }
      // Every stage needs an F per micro-batch, so a number at or past the action count can
      // belong to no valid schedule; refusing it keeps a typo from allocating gigabytes.
      if (static_cast<size_t>(a.stage) >= total || (a.microbatch >= 0 && static_cast<size_t>(a.microbatch) >= total)) {
        fail(Status::invalid_argument,
             "rank %zu, action %zu (%s): stage %d / micro-batch %d cannot exist in a schedule of %zu actions "
             "(each stage runs an F for each micro-batch)",
             r, k, text.c_str(), a.stage, a.microbatch, total);
      }
      max_stage = std::max(max_stage, a.stage);
      max_mb = std::max(max_mb, a.microbatch);
      any_f = any_f || a.kind == Kind::F;
    }
  }
  if (!any_f) fail(Status::invalid_argument, "the lists hold no F action: a schedule needs at least one forward");

  Schedule s;
  s.method = method;
  s.ranks = static_cast<int>(lists.size());
  s.stages = max_stage + 1;
  s.microbatches = max_mb + 1;
  // Stage s sits on the rank whose list holds an F of it, the lowest such rank; a stage held by
  // two ranks is the validator's 'placement' business.
  s.stage_rank.assign(static_cast<size_t>(s.stages), -1);
  for (size_t r = 0; r < lists.size(); ++r) {
    for (const Action& a : lists[r]) {
      if (a.kind == Kind::F && s.stage_rank[static_cast<size_t>(a.stage)] < 0) {
        s.stage_rank[static_cast<size_t>(a.stage)] = static_cast<int>(r);
      }
    }
  }
  s.actions = std::move(lists);
  if (!s.has_comm()) {
    // Several stages per rank: the generators' placement (gen_comm.cpp says why the simple
    // lowering can mis-order messages there), so that compute-only lists get what generate gives.
    // An order that cannot run falls back to the simple lowering; the validator names its fault.
    bool placed = false;
    if (s.stages_per_rank() > 1) {
      try {
        gen::place_communication_by_time(s);
        placed = true;
      } catch (const Error&) {
      }
    }
    if (!placed) add_communication(s);
  }
  return s;
}

}  // namespace weft::pipeline
