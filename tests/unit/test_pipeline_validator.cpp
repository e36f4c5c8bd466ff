// validate() (weft_schedule_validate's rules) on hand-written schedules: valid ones must pass;
// each invalid one is a valid base with one edit, and must be refused with the expected rule,
// rank, action index and action string (the message's first part, written out here by hand) and
// a hint of the reason. The deadlock cases were traced by hand under the exchange model of
// weft/pipeline.h (every run of consecutive SEND/RECV actions posted at once, completing when
// every partner action has been posted).
//
// WEFT_TEST_INJECT=1 (ctest unit.pipeline_validator_inject) flips every case: each valid
// schedule gets one action swapped or removed and must then be refused; each invalid case is
// un-corrupted (its valid base must then pass) and is also checked against a wrong expected
// prefix (which must not match). The run passes only when every flip changed the verdict.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/pipeline/schedule.h"
#include "schedule_test_util.h"

namespace wp = weft::pipeline;
using schedtest::sched;
using wp::Action;
using wp::Kind;
using wp::Schedule;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

struct Verdict {
  bool valid;
  std::string message;
};
Verdict judge(const Schedule& s) {
  try {
    wp::validate(s);
    return {true, ""};
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.status(), weft::Status::invalid_argument) << e.message();
    return {false, e.message()};
  }
}

// ---------------------------------------------------------------- valid schedules

// GPipe, p = 2, m = 2.
Schedule gpipe2() {
  return sched({0, 1}, 2,
               {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"});
}

// 1F1B, p = 3, m = 4, with the SEND after a compute and the RECV before the next one adjacent
// (one exchange: send_forward_recv_backward).
Schedule one_f_one_b3() {
  return sched({0, 1, 2}, 4,
               {"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0B0 0F3 0SEND_F3 0RECV_B1 0B1 0RECV_B2 0B2 0RECV_B3 0B3",
                "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 1RECV_B0 1B0 1SEND_B0 1RECV_F2 1F2 1SEND_F2 1RECV_B1 1B1 "
                "1SEND_B1 1RECV_F3 1F3 1SEND_F3 1RECV_B2 1B2 1SEND_B2 1RECV_B3 1B3 1SEND_B3",
                "2RECV_F0 2F0 2B0 2SEND_B0 2RECV_F1 2F1 2B1 2SEND_B1 2RECV_F2 2F2 2B2 2SEND_B2 2RECV_F3 2F3 2B3 2SEND_B3"});
}

// A V: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2; 1 -> 2 is a local turn (no message).
Schedule v_shape() {
  return sched({0, 1, 1, 0}, 2,
               {"0F0 0SEND_F0 0F1 0SEND_F1 3RECV_F0 3F0 3B0 3SEND_B0 3RECV_F1 3F1 3B1 3SEND_B1 0RECV_B0 0B0 0RECV_B1 0B1",
                "1RECV_F0 1F0 2F0 2SEND_F0 1RECV_F1 1F1 2F1 2SEND_F1 2RECV_B0 2B0 1B0 1SEND_B0 2RECV_B1 2B1 1B1 1SEND_B1"});
}

// I/W split with REDUCE_GRAD after the last W, p = 2, m = 2.
Schedule iw_split() {
  return sched({0, 1}, 2,
               {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1 0REDUCE_GRAD",
                "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W0 1W1 1REDUCE_GRAD"});
}

// I/W split, p = 2, m = 3: rank 1's SEND_B0 shares an exchange with RECV_F1.
Schedule zb3() {
  return sched({0, 1}, 3,
               {"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0I0 0RECV_B1 0I1 0RECV_B2 0I2 0W0 0W1 0W2",
                "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1RECV_F2 1F2 1I2 1SEND_B2 1W0 1W1 1W2"});
}

// One rank holding both stages: no messages at all.
Schedule single_rank() { return sched({0, 0}, 2, {"0F0 1F0 0F1 1F1 1B0 0B0 1B1 0B1 0REDUCE_GRAD 1REDUCE_GRAD"}); }

struct ValidCase {
  const char* name;
  Schedule (*make)();
};
const ValidCase kValid[] = {{"gpipe p=2 m=2", gpipe2}, {"1f1b p=3 m=4", one_f_one_b3}, {"v-shape", v_shape},
                            {"I/W split", iw_split},   {"zb p=2 m=3", zb3},            {"p=1", single_rank}};

TEST(PipelineValidator, ValidSchedulesPass) {
  for (size_t c = 0; c < std::size(kValid); ++c) {
    Schedule s = kValid[c].make();
    if (schedtest::inject_enabled()) {
      // Even cases: the last rank's first two actions swapped (a RECV after the F that needs
      // it, or a stage's F before its input stage's F); odd cases: rank 0's third action
      // (an F) removed.
      if (c % 2 == 0) {
        std::swap(s.actions.back()[0], s.actions.back()[1]);
      } else {
        s.actions[0].erase(s.actions[0].begin() + 2);
      }
      schedtest::record_injection(!judge(s).valid);
      continue;
    }
    const Verdict v = judge(s);
    EXPECT_TRUE(v.valid) << kValid[c].name << ": " << v.message;
  }
}

// ---------------------------------------------------------------- invalid schedules

struct InvalidCase {
  const char* name;
  Schedule (*base)();
  std::vector<std::string> edited;  // the base's lists with one edit
  const char* prefix;               // "rank R, action K (TEXT): rule 'RULE'"
  const char* hint;                 // a part of the reason
};

const std::vector<InvalidCase>& invalid_cases() {
  static const std::vector<InvalidCase> cases = {
      {"deadlock: each rank receives before it sends what the other waits for", gpipe2,
       {"0F0 0SEND_F0 0F1 0RECV_B0 0B0 0SEND_F1 0RECV_B1 0B1", "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       "rank 0, action 3 (0RECV_B0): rule 'no deadlock'", "rank 1, action 2 (1RECV_F1) waits for rank 0's action 5"},
      {"deadlock: both ranks send first, in separate exchanges", zb3,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0I0 0RECV_B1 0I1 0RECV_B2 0I2 0W0 0W1 0W2",
        "1RECV_F0 1F0 1I0 1SEND_B0 1W0 1RECV_F1 1F1 1I1 1SEND_B1 1RECV_F2 1F2 1I2 1SEND_B2 1W1 1W2"},
       "rank 0, action 3 (0SEND_F1): rule 'no deadlock'", "rank 1, action 3 (1SEND_B0) waits for rank 0's action 6"},
      {"a skipped backward", gpipe2,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1SEND_B1"},
       "rank 1, action 3 (1F1): rule 'complete'", "its backward never runs"},
      {"a duplicated F", gpipe2,
       {"0F0 0SEND_F0 0F1 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       "rank 0, action 3 (0F1): rule 'complete'", "twice (first at action 2)"},
      {"a message sent to the wrong rank (the RECV is on a rank that does not hold the stage)", one_f_one_b3,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0B0 0F3 0SEND_F3 0RECV_B1 0B1 0RECV_B2 0B2 0RECV_B3 0B3",
        "1RECV_F0 1F0 1SEND_F0 2RECV_F0 1RECV_F1 1F1 1SEND_F1 1RECV_B0 1B0 1SEND_B0 1RECV_F2 1F2 1SEND_F2 1RECV_B1 1B1 "
        "1SEND_B1 1RECV_F3 1F3 1SEND_F3 1RECV_B2 1B2 1SEND_B2 1RECV_B3 1B3 1SEND_B3",
        "2F0 2B0 2SEND_B0 2RECV_F1 2F1 2B1 2SEND_B1 2RECV_F2 2F2 2B2 2SEND_B2 2RECV_F3 2F3 2B3 2SEND_B3"},
       "rank 1, action 3 (2RECV_F0): rule 'placement'", "stage 2 is on rank 2"},
      {"W before I", iw_split,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1 0REDUCE_GRAD",
        "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1W1 1I1 1SEND_B1 1W0 1REDUCE_GRAD"},
       "rank 1, action 6 (1W1): rule 'order'", "1I1 is action 7"},
      {"F before its RECV", gpipe2,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", "1RECV_F0 1F0 1F1 1RECV_F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       "rank 1, action 2 (1F1): rule 'order'", "1RECV_F1 is action 3"},
      {"B before its F", gpipe2,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", "1RECV_F0 1B0 1F0 1RECV_F1 1F1 1SEND_B0 1B1 1SEND_B1"},
       "rank 1, action 1 (1B0): rule 'order'", "1F0 is action 2"},
      {"messages between two ranks out of order", gpipe2,
       {"0F0 0F1 0SEND_F1 0SEND_F0 0RECV_B0 0B0 0RECV_B1 0B1", "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       "rank 0, action 2 (0SEND_F1): rule 'transfers'", "rank 1's action 0 (1RECV_F0)"},
      {"REDUCE_GRAD before the last backward piece", iw_split,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0REDUCE_GRAD 0W1",
        "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W0 1W1 1REDUCE_GRAD"},
       "rank 0, action 9 (0REDUCE_GRAD): rule 'order'", "0W1 is action 10"},
      {"REDUCE_GRAD twice", iw_split,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1 0REDUCE_GRAD",
        "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W0 1W1 1REDUCE_GRAD 1REDUCE_GRAD"},
       "rank 1, action 11 (1REDUCE_GRAD): rule 'order'", "at most once"},
      {"a stage computed on two ranks", gpipe2,
       {"0F0 0SEND_F0 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", "0F1 1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       "rank 1, action 0 (0F1): rule 'placement'", "stage 0 is on rank 0"},
      {"a SEND nobody receives", gpipe2,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", "1RECV_F0 1F0 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       "rank 0, action 3 (0SEND_F1): rule 'transfers'",
       "no rank receives it (stage 1 is on rank 1, whose list has no 1RECV_F1)"},
      {"an output never sent", gpipe2,
       {"0F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", "1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"},
       "rank 0, action 0 (0F0): rule 'transfers'", "its output is never sent"},
      {"a SEND between stages on one rank", v_shape,
       {"0F0 0SEND_F0 0F1 0SEND_F1 3RECV_F0 3F0 3B0 3SEND_B0 3RECV_F1 3F1 3B1 3SEND_B1 0RECV_B0 0B0 0RECV_B1 0B1",
        "1RECV_F0 1F0 1SEND_F0 2F0 2SEND_F0 1RECV_F1 1F1 2F1 2SEND_F1 2RECV_B0 2B0 1B0 1SEND_B0 2RECV_B1 2B1 1B1 "
        "1SEND_B1"},
       "rank 1, action 2 (1SEND_F0): rule 'transfers'", "nothing is sent between stages on one rank"},
      {"I without its W", iw_split,
       {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1 0REDUCE_GRAD",
        "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W0 1REDUCE_GRAD"},
       "rank 1, action 6 (1I1): rule 'complete'", "1W1 never runs"},
  };
  return cases;
}

TEST(PipelineValidator, InvalidSchedulesNameRuleRankAndAction) {
  for (const InvalidCase& c : invalid_cases()) {
    const Schedule base = c.base();
    Schedule edited = base;
    edited.actions.clear();
    for (const auto& l : c.edited) edited.actions.push_back(schedtest::acts(l));
    const std::string prefix = c.prefix;
    if (schedtest::inject_enabled()) {
      // Un-corrupted: the base must pass. Wrong expectation: the message must not start with a
      // prefix that names the rank after the right one.
      schedtest::record_injection(judge(base).valid);
      const Verdict v = judge(edited);
      const std::string wrong = "rank " + std::to_string(prefix[5] - '0' + 1) + prefix.substr(6);
      schedtest::record_injection(v.valid || v.message.rfind(wrong, 0) != 0);
      continue;
    }
    EXPECT_TRUE(judge(base).valid) << c.name << ": the base must be valid";
    const Verdict v = judge(edited);
    EXPECT_FALSE(v.valid) << c.name << " passed:\n" << schedtest::show(edited.actions);
    EXPECT_EQ(v.message.rfind(prefix, 0), 0u) << c.name << ": expected the message to start with\n  " << prefix
                                              << "\ngot\n  " << v.message;
    EXPECT_NE(v.message.find(c.hint), std::string::npos) << c.name << ": expected '" << c.hint << "' in\n  "
                                                         << v.message;
  }
}

TEST(PipelineValidator, DeadlockMessageNamesEveryWaitingRank) {
  if (schedtest::inject_enabled()) GTEST_SKIP() << "covered by the injected cases";
  const InvalidCase& c = invalid_cases()[0];
  Schedule s = c.base();
  s.actions.clear();
  for (const auto& l : c.edited) s.actions.push_back(schedtest::acts(l));
  const Verdict v = judge(s);
  EXPECT_EQ(v.message,
            "rank 0, action 3 (0RECV_B0): rule 'no deadlock': the exchange it is in waits for rank 1's action 5 "
            "(1SEND_B0), which rank 1 never posts; rank 1, action 2 (1RECV_F1) waits for rank 0's action 5 "
            "(0SEND_F1), which rank 0 never posts");
}

TEST(PipelineValidator, InconsistentStructRefused) {
  if (schedtest::inject_enabled()) GTEST_SKIP() << "covered by the injected cases";
  Schedule s = gpipe2();
  s.stage_rank.push_back(0);  // 3 placement entries for 2 stages
  Verdict v = judge(s);
  EXPECT_NE(v.message.find("one entry per stage"), std::string::npos) << v.message;
  s = gpipe2();
  s.actions.pop_back();  // 2 ranks, 1 list
  v = judge(s);
  EXPECT_NE(v.message.find("one list per rank"), std::string::npos) << v.message;
  s = gpipe2();
  s.actions[1][1].stage = 7;  // a stage the schedule does not have
  v = judge(s);
  EXPECT_EQ(v.message.rfind("rank 1, action 1 (7F0): rule 'placement'", 0), 0u) << v.message;
  s = gpipe2();
  s.microbatches = 3;  // micro-batch 2 never runs
  v = judge(s);
  EXPECT_NE(v.message.find("rule 'complete': 0F2 never runs"), std::string::npos) << v.message;
}

// ---------------------------------------------------------------- random edits

// Thousands of random one- and two-action edits of the valid schedules (deleted, duplicated,
// moved, or given another kind, stage or micro-batch, including ones outside the schedule):
// each must be judged without a crash, and a refusal must have the documented form.
// "rank R, action K (TEXT): rule 'RULE': WHY" (or "rank R: ..." / "stage S: ..." for an action
// that is missing altogether), RULE one of the five.
bool documented_form(const std::string& m) {
  const size_t at = m.find(": rule '");
  if (at == std::string::npos || (m.rfind("rank ", 0) != 0 && m.rfind("stage ", 0) != 0)) return false;
  const std::string head = m.substr(0, at);
  const bool named_action = head.find(", action ") != std::string::npos;
  if (named_action && (head.back() != ')' || head.find(" (") == std::string::npos)) return false;
  for (const char* rule : {"placement", "complete", "transfers", "order", "no deadlock"}) {
    const std::string tail = std::string(rule) + "': ";
    if (m.compare(at + 8, tail.size(), tail) == 0) return m.size() > at + 8 + tail.size();
  }
  return false;
}

TEST(PipelineValidator, RandomEditsAreJudgedInTheDocumentedForm) {
  std::mt19937 rng(12345);
  size_t refused = 0, passed = 0;
  bool injected = false;
  for (int trial = 0; trial < 3000; ++trial) {
    Schedule s = kValid[static_cast<size_t>(trial) % std::size(kValid)].make();
    const int edits = 1 + trial % 2;
    for (int e = 0; e < edits; ++e) {
      auto& list = s.actions[rng() % s.actions.size()];
      if (list.empty()) continue;
      const size_t k = rng() % list.size();
      switch (rng() % 6) {
        case 0: list.erase(list.begin() + static_cast<long>(k)); break;
        case 1: list.insert(list.begin() + static_cast<long>(rng() % list.size()), list[k]); break;
        case 2: std::swap(list[k], list[rng() % list.size()]); break;
        case 3: list[k].kind = static_cast<Kind>(rng() % wp::kNumKinds); break;
        case 4: list[k].stage = static_cast<int>(rng() % 6) - 1; break;
        default: list[k].microbatch = static_cast<int>(rng() % 6) - 1; break;
      }
    }
    Verdict v = judge(s);
    if (v.valid) {
      ++passed;
      continue;
    }
    ++refused;
    if (schedtest::inject_enabled() && !injected) {
      injected = true;
      v.message.replace(v.message.find("rule"), 4, "rulx");
      schedtest::record_injection(!documented_form(v.message));
      continue;
    }
    if (!schedtest::inject_enabled()) {
      EXPECT_TRUE(documented_form(v.message)) << v.message << "\n" << schedtest::show(s.actions);
    }
  }
  std::printf("random edits: %zu refused, %zu still valid\n", refused, passed);
  EXPECT_GT(refused, 2000u);
}

// ---------------------------------------------------------------- cost

// Interleaved placement (stage c*p + r on rank r), every micro-batch through all its stages
// before the next (deadlock-free, if slow), backward split into I and W.
std::vector<std::vector<Action>> looped(int p, int m, int v) {
  std::vector<std::vector<Action>> lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto& l = lists[static_cast<size_t>(r)];
    for (int i = 0; i < m; ++i) {
      for (int c = 0; c < v; ++c) l.push_back({Kind::F, c * p + r, i});
    }
    for (int i = 0; i < m; ++i) {
      for (int c = v - 1; c >= 0; --c) {
        l.push_back({Kind::I, c * p + r, i});
        l.push_back({Kind::W, c * p + r, i});
      }
    }
  }
  return lists;
}

TEST(PipelineValidator, LargeScheduleIsCheap) {
  if (schedtest::inject_enabled()) GTEST_SKIP() << "covered by the injected cases";
  const Schedule s = wp::make_schedule(looped(8, 32, 4));
  size_t n = 0;
  for (const auto& l : s.actions) n += l.size();
  // 32 stages x 32 micro-batches x 3 compute actions, plus 2 messages per cross-rank boundary
  // and micro-batch (31 boundaries, both directions).
  EXPECT_EQ(n, 32u * 32 * 3 + 31u * 32 * 2 * 2);
  std::vector<double> ms;
  for (int rep = 0; rep < 9; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    wp::validate(s);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("validate p=8 m=32 v=4 (%zu actions): median %.3f ms\n", n, ms[ms.size() / 2]);
  EXPECT_LT(ms[ms.size() / 2], 10.0);
}

}  // namespace
