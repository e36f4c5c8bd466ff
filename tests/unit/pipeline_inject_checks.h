// Shared by the pipeline generator, simulator, tune and C-shim tests (test_pipeline_generators.cpp,
// test_pipeline_simulator.cpp, test_pipeline_tune.cpp, test_pipeline_simulate_api.cpp): the injection switch and tally
// (WEFT_TEST_INJECT=1 corrupts one result per check; the run passes only when every corruption
// was caught, ctest unit.pipeline_*_inject) and the checks that go through it.
#pragma once

#include <gtest/gtest.h>

#include "inject_tally.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/pipeline/schedule.h"

namespace pipecheck {

using inject::tally;
inline bool inject_enabled() { return inject::enabled(); }

inline ::testing::Environment* const kInjectionReport = inject::register_report();

// Records one check's outcome: pass is whether the (possibly corrupted) result passed.
inline void record(bool injected, bool pass, const std::string& what) {
  if (injected) {
    ++tally().injected;
    if (!pass) ++tally().caught;
    else ADD_FAILURE() << what << ": the corrupted result (WEFT_TEST_INJECT) passed the check";
  } else if (!pass) {
    ADD_FAILURE() << what;
  }
}

// got == want within rel (0 = exactly); an injection moves got by 1 + |got|.
inline void check_value(double got, double want, const std::string& what, double rel = 0) {
  const bool injected = inject_enabled();
  if (injected) got += 1 + std::fabs(got);
  const bool pass = rel == 0 ? got == want : std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want));
  record(injected, pass, what + ": got " + std::to_string(got) + ", expected " + std::to_string(want));
}

// A predicate on a value: an injection moves the value by 1 + |v| first.
template <class Ok>
inline void check_that(double got, Ok ok, const std::string& what) {
  const bool injected = inject_enabled();
  if (injected) got += 1 + std::fabs(got);
  record(injected, ok(got), what + ": got " + std::to_string(got));
}

// The compute actions of a rank's list, in order (what the generators decide).
inline std::vector<weft::pipeline::Action> compute_only(const std::vector<weft::pipeline::Action>& list) {
  std::vector<weft::pipeline::Action> out;
  for (const auto& a : list) {
    if (weft::pipeline::is_compute(a.kind)) out.push_back(a);
  }
  return out;
}

inline std::string describe(const std::vector<weft::pipeline::Action>& list) {
  std::string s;
  for (const auto& a : list) s.append(s.empty() ? "" : " ").append(weft::pipeline::to_string(a));
  return s;
}

// A list equals the expected one; an injection drops the expected list's last action first.
inline void check_list(const std::vector<weft::pipeline::Action>& got, std::vector<weft::pipeline::Action> want,
                       const std::string& what) {
  const bool injected = inject_enabled() && !want.empty();
  if (injected) want.pop_back();
  record(injected, got == want, what + ":\n  got      " + describe(got) + "\n  expected " + describe(want));
}

}  // namespace pipecheck
