// Shared by tests/unit/test_pipeline_schedule.cpp and test_pipeline_validator.cpp: hand-written
// action lists in torch's notation, parsed here by a few lines that share no code with
// core/pipeline/csv.cpp, and the injection switch and tally (the proof that the checks can
// fail), as tests/unit/optimizer_test_util.h has them.
#pragma once

#include <gtest/gtest.h>

#include "inject_tally.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/pipeline/schedule.h"

namespace schedtest {

using weft::pipeline::Action;
using weft::pipeline::Kind;
using weft::pipeline::Schedule;

// "0F0", "1SEND_F3", "2REDUCE_GRAD" -> Action; a malformed token fails the test and gives F(0,0).
inline Action act(const std::string& t) {
  static const std::pair<const char*, Kind> kinds[] = {
      {"REDUCE_GRAD", Kind::REDUCE_GRAD}, {"SEND_F", Kind::SEND_F}, {"RECV_F", Kind::RECV_F},
      {"SEND_B", Kind::SEND_B},           {"RECV_B", Kind::RECV_B}, {"F", Kind::F},
      {"B", Kind::B},                     {"I", Kind::I},           {"W", Kind::W}};
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  const int stage = i ? std::atoi(t.substr(0, i).c_str()) : -1;
  for (const auto& [name, kind] : kinds) {
    const size_t n = std::strlen(name);
    if (t.compare(i, n, name) != 0) continue;
    const std::string rest = t.substr(i + n);
    if (kind == Kind::REDUCE_GRAD && rest.empty() && stage >= 0) return Action{kind, stage, -1};
    if (kind != Kind::REDUCE_GRAD && !rest.empty() && stage >= 0 &&
        rest.find_first_not_of("0123456789") == std::string::npos) {
      return Action{kind, stage, std::atoi(rest.c_str())};
    }
  }
  ADD_FAILURE() << "test table: bad action '" << t << "'";
  return Action{Kind::F, 0, 0};
}

// "0F0 0SEND_F0 0F1" -> actions.
inline std::vector<Action> acts(const std::string& text) {
  std::vector<Action> out;
  std::istringstream in(text);
  for (std::string t; in >> t;) out.push_back(act(t));
  return out;
}

// A schedule with the placement given by hand (not derived by the code under test).
inline Schedule sched(std::vector<int> stage_rank, int microbatches, const std::vector<std::string>& ranks) {
  Schedule s;
  s.ranks = static_cast<int>(ranks.size());
  s.stages = static_cast<int>(stage_rank.size());
  s.microbatches = microbatches;
  s.stage_rank = std::move(stage_rank);
  for (const auto& r : ranks) s.actions.push_back(acts(r));
  return s;
}

// The lists as text again, one rank per line (for messages and comparisons).
inline std::string show(const std::vector<std::vector<Action>>& lists) {
  std::string out;
  for (const auto& l : lists) {
    for (size_t k = 0; k < l.size(); ++k) out.append(k ? " " : "").append(weft::pipeline::to_string(l[k]));
    out.append("\n");
  }
  return out;
}

// ---------------------------------------------------------------- injection
using inject::tally;
inline bool inject_enabled() { return inject::enabled(); }
inline void record_injection(bool caught) {
  ++tally().injected;
  if (caught) ++tally().caught;
}


}  // namespace schedtest
