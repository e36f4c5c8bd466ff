// The unit tests' injection proof, written once: WEFT_TEST_INJECT=1 makes each check corrupt
// the result (or flip the case) it judges, the tally counts corruptions and catches, and the
// report at the end fails the run unless every corruption was caught (ctest unit.*_inject).
// A test file includes this through its family's helper header and registers the report once:
//   ::testing::Environment* const kInjectionReport = inject::register_report();
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace inject {

inline bool enabled() {
  const char* e = std::getenv("WEFT_TEST_INJECT");
  return e && std::strcmp(e, "1") == 0;
}

struct Tally {
  long injected = 0, caught = 0;
};
inline Tally& tally() {
  static Tally t;
  return t;
}

class Report : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!enabled()) return;
    std::printf("injection: %ld cases, %ld caught\n", tally().injected, tally().caught);
    EXPECT_TRUE(tally().injected > 0 && tally().caught == tally().injected)
        << "WEFT_TEST_INJECT: a corrupted result passed its check, or nothing was corrupted";
  }
};

inline ::testing::Environment* register_report() { return ::testing::AddGlobalTestEnvironment(new Report); }

// A truth a test states (a refusal happened, a message names something). Under injection the
// truth is corrupted to !ok, which the check fails on exactly when ok held: that is a catch.
inline void check(bool ok, const std::string& what) {
  if (enabled()) {
    ++tally().injected;
    if (ok)
      ++tally().caught;
    else  // the truth did not hold even uncorrupted: name it, or a failed report says nothing
      std::printf("injection: not caught, the truth itself failed: %s\n", what.c_str());
    return;
  }
  EXPECT_TRUE(ok) << what;
}

// The verdict of a check that judged a value it may have corrupted itself (`injected`): a
// corrupted value judged bad is a catch; an uncorrupted one judged bad is a test failure.
inline void record(bool injected, bool bad, const std::string& what, const std::string& detail) {
  if (injected) {
    ++tally().injected;
    if (bad) ++tally().caught;
    return;
  }
  if (bad) ADD_FAILURE() << what << ": " << detail;
}

}  // namespace inject
