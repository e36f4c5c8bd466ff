// main() of the GoogleTest programs that run on every rank under weftrun: makes the world
// communicator, prints every failure with the rank in front, and exits non-zero on failure.
#include <cstdio>
#include <string>

#include "mp_gtest.h"

namespace mpt {
World g_world;
}  // namespace mpt

namespace {

// Prints every failed assertion with the rank in front. (UnitTest::current_test_info() must
// not be called from OnTestPartResult: GoogleTest holds its own mutex there.)
class RankPrinter : public testing::EmptyTestEventListener {
  void OnTestStart(const testing::TestInfo& t) override {
    name_ = std::string(t.test_suite_name()) + "." + t.name();
  }
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    mpt::logf("FAIL %s at %s:%d: %s", name_.c_str(), r.file_name() ? r.file_name() : "?", r.line_number(),
              r.summary());
  }
  std::string name_ = "?";
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  mpt::g_world = mpt::init_world();
  testing::UnitTest::GetInstance()->listeners().Append(new RankPrinter);
  int rc = RUN_ALL_TESTS();
  weft_status_t s = weft_comm_destroy(mpt::g_world.comm);
  if (s != WEFT_OK) {
    mpt::logf("weft_comm_destroy(world): %s: %s", mpt::status_name(s), mpt::last_error().c_str());
    rc = 1;
  }
  if (rc) mpt::logf("FAILED (see FAIL lines above)");
  return rc;
}
