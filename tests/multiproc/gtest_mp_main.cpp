// main() of the GoogleTest programs that run on every rank under weftrun: makes the world
// communicator, prints every failure with the rank in front, and exits non-zero on failure.
#include <cstdio>

#include "mp_gtest.h"

namespace mpt {
World g_world;
}  // namespace mpt

namespace {

class RankPrinter : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    const testing::TestInfo* t = testing::UnitTest::GetInstance()->current_test_info();
    mpt::logf("FAIL %s.%s at %s:%d: %s", t ? t->test_suite_name() : "?", t ? t->name() : "?",
              r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
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
