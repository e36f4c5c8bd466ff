// What the GPU kernel tests (test_kernels, test_optimizer_kernels, test_moe_rows_kernels,
// test_moe_router_kernels) share: the program's injection tally with the report that fails an
// injection run unless a corruption happened and every one was caught (injection.h says how
// results are corrupted), and the bit-for-bit comparison of a device result with its CPU twin's.
// Each program registers the report once:
//   ::testing::Environment* const kInjectionReport = weft::gputest::register_injection_report();
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "injection.h"

namespace weft::gputest {

inline mpt::InjectTally& tally() {
  static mpt::InjectTally t;
  return t;
}

class InjectionReport : public ::testing::Environment {
 public:
  void TearDown() override {
    std::string why;
    if (!mpt::inject_enabled() || !gpu_available(&why)) return;
    EXPECT_TRUE(tally().report(false)) << "WEFT_TEST_INJECT: a corrupted result passed, or none was corrupted";
  }
};

inline ::testing::Environment* register_injection_report() {
  return ::testing::AddGlobalTestEnvironment(new InjectionReport);
}

// After injection (if on): a failure names what and counts the result in the tally, unless
// injection and failure agree. `bad` is the number of elements the check rejected.
inline void record_check(const std::string& what, bool injected, size_t bad, weft_dtype_t dt, const char* against) {
  tally().record(mpt::dtype_name(dt), injected, bad != 0);
  if (injected != (bad != 0)) {
    ADD_FAILURE() << what
                  << (bad ? std::string(": ").append(std::to_string(bad)).append(" elements differ from the ").append(against)
                          : std::string(": the corrupted result (WEFT_TEST_INJECT) passed the check"));
  }
}

// A device result of `count` elements of dt against the CPU twin's, bit for bit (NaNs of any
// payload equal when nan_equal: the GPU returns its canonical NaN where the CPU keeps an
// operand's). `got` holds at least count elements (exactly, when exact_size).
inline void expect_twin(std::vector<uint8_t> got, const void* want, weft_dtype_t dt, size_t count,
                        const std::string& what, bool nan_equal, bool exact_size = true) {
  if (exact_size) {
    ASSERT_EQ(got.size(), count * mpt::dtype_bytes(dt)) << what;
  } else {
    ASSERT_GE(got.size(), count * mpt::dtype_bytes(dt)) << what;
  }
  const bool injected = inject(got.data(), dt, count);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t g = mpt::load_bits(dt, got.data(), i), w = mpt::load_bits(dt, want, i);
    if (g == w || (nan_equal && mpt::is_nan_bits(dt, g) && mpt::is_nan_bits(dt, w))) continue;
    if (++bad <= 5 && !injected) {
      ADD_FAILURE() << what << ": element " << i << ": CPU " << mpt::format_value(dt, w) << ", device "
                    << mpt::format_value(dt, g);
    }
  }
  if (count == 0) return;
  record_check(what, injected, bad, dt, "CPU twin");
}

}  // namespace weft::gputest
