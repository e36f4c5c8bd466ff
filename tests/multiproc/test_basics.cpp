// weft_version, weft_status_string and weft_dtype_size: the calls that need no communicator.
// One process, no launcher.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <thread>
#include <set>
#include <string>

#include "mp_common.h"
#include "reference.h"
#include "weft/weft.h"

TEST(Basics, VersionMatchesHeader) {
  int code = -1, abi = -1;
  ASSERT_EQ(weft_version(&code, &abi), WEFT_OK);
  EXPECT_EQ(code, WEFT_VERSION_CODE);
  EXPECT_EQ(abi, WEFT_ABI_VERSION);
  EXPECT_EQ(WEFT_VERSION_CODE, WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH);
}

TEST(Basics, VersionAcceptsNullOutPointers) {
  int code = -1, abi = -1;
  EXPECT_EQ(weft_version(nullptr, nullptr), WEFT_OK);
  EXPECT_EQ(weft_version(&code, nullptr), WEFT_OK);
  EXPECT_EQ(code, WEFT_VERSION_CODE);
  EXPECT_EQ(weft_version(nullptr, &abi), WEFT_OK);
  EXPECT_EQ(abi, WEFT_ABI_VERSION);
}

TEST(Basics, StatusStringForEveryStatus) {
  const struct {
    weft_status_t s;
    const char* name;
  } all[] = {
      {WEFT_OK, "WEFT_OK"},
      {WEFT_ERR_INVALID_ARGUMENT, "WEFT_ERR_INVALID_ARGUMENT"},
      {WEFT_ERR_UNSUPPORTED, "WEFT_ERR_UNSUPPORTED"},
      {WEFT_ERR_OUT_OF_MEMORY, "WEFT_ERR_OUT_OF_MEMORY"},
      {WEFT_ERR_TIMEOUT, "WEFT_ERR_TIMEOUT"},
      {WEFT_ERR_REMOTE, "WEFT_ERR_REMOTE"},
      {WEFT_ERR_ABORTED, "WEFT_ERR_ABORTED"},
      {WEFT_ERR_MISMATCH, "WEFT_ERR_MISMATCH"},
      {WEFT_ERR_TRANSPORT, "WEFT_ERR_TRANSPORT"},
      {WEFT_ERR_INTERNAL, "WEFT_ERR_INTERNAL"},
      {WEFT_IN_PROGRESS, "WEFT_IN_PROGRESS"},
  };
  std::set<std::string> seen;
  for (const auto& e : all) {
    const char* text = weft_status_string(e.s);
    ASSERT_NE(text, nullptr) << e.name;
    std::string t(text);
    EXPECT_FALSE(t.empty()) << e.name;
    // The text names the status, so a log line is searchable.
    EXPECT_NE(t.find(e.name), std::string::npos) << e.name << " -> \"" << t << "\"";
    EXPECT_TRUE(seen.insert(t).second) << "two statuses share the text \"" << t << "\"";
  }
}

TEST(Basics, StatusStringOutOfRangeIsNeverNull) {
  std::string ok = weft_status_string(WEFT_OK);
  for (int v : {-1, 11, 12, 99, 1000, INT_MAX, INT_MIN}) {
    const char* text = weft_status_string(static_cast<weft_status_t>(v));
    ASSERT_NE(text, nullptr) << v;
    EXPECT_FALSE(std::string(text).empty()) << v;
    EXPECT_NE(std::string(text), ok) << v << " must not read as success";
  }
}

TEST(Basics, DtypeSizeOfEveryDtype) {
  const struct {
    weft_dtype_t dt;
    size_t size;
  } all[] = {
      {WEFT_FLOAT64, 8}, {WEFT_FLOAT32, 4}, {WEFT_FLOAT16, 2}, {WEFT_BFLOAT16, 2},
      {WEFT_FP8_E4M3, 1}, {WEFT_FP8_E5M2, 1}, {WEFT_INT8, 1}, {WEFT_UINT8, 1},
      {WEFT_INT32, 4}, {WEFT_UINT32, 4}, {WEFT_INT64, 8}, {WEFT_UINT64, 8},
  };
  static_assert(WEFT_NUM_DTYPES == 12, "update this table");
  for (const auto& e : all) {
    size_t s = 12345;
    EXPECT_EQ(weft_dtype_size(e.dt, &s), WEFT_OK) << mpt::dtype_name(e.dt) << ": " << mpt::last_error();
    EXPECT_EQ(s, e.size) << mpt::dtype_name(e.dt);
    EXPECT_EQ(mpt::dtype_bytes(e.dt), e.size) << "test reference disagrees";
  }
}

TEST(Basics, DtypeSizeRejectsBadDtype) {
  for (int v : {-1, 12, 99, INT_MAX}) {
    size_t s = 12345;
    EXPECT_EQ(weft_dtype_size(static_cast<weft_dtype_t>(v), &s), WEFT_ERR_INVALID_ARGUMENT) << v;
    EXPECT_EQ(s, 0u) << "weft.h: 0 for a bad dtype (" << v << ")";
    std::string err = mpt::last_error();
    EXPECT_FALSE(err.empty());
    EXPECT_TRUE(mpt::contains_ci(err, "dtype")) << "message should name the argument: " << err;
  }
  EXPECT_EQ(weft_dtype_size(WEFT_FLOAT32, nullptr), WEFT_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(mpt::last_error().empty());
}

TEST(Basics, LastErrorIsThreadLocalAndNeverNull) {
  EXPECT_NE(weft_last_error(), nullptr);
  size_t s;
  ASSERT_EQ(weft_dtype_size(static_cast<weft_dtype_t>(99), &s), WEFT_ERR_INVALID_ARGUMENT);
  std::string here = mpt::last_error();
  std::string there = "unset";
  std::thread t([&] { there = mpt::last_error(); });
  t.join();
  EXPECT_TRUE(there.empty()) << "another thread sees this thread's error: \"" << there << "\"";
  EXPECT_EQ(mpt::last_error(), here);
}

// The reference's own codecs, on values every format agrees on (guards the test oracle).
TEST(Basics, ReferenceCodecsRoundTrip) {
  using mpt::decode_float;
  using mpt::encode_float;
  EXPECT_EQ(encode_float(WEFT_FLOAT16, 1.0, false), 0x3c00u);
  EXPECT_EQ(encode_float(WEFT_FLOAT16, 65504.0, false), 0x7bffu);
  EXPECT_EQ(encode_float(WEFT_FLOAT16, 65520.0, false), 0x7c00u);  // rounds to inf
  EXPECT_EQ(encode_float(WEFT_FLOAT16, std::ldexp(1.0, -24), false), 0x0001u);
  EXPECT_EQ(encode_float(WEFT_BFLOAT16, 1.0, false), 0x3f80u);
  EXPECT_EQ(encode_float(WEFT_BFLOAT16, -2.0, false), 0xc000u);
  EXPECT_EQ(encode_float(WEFT_FP8_E4M3, 448.0, false), 0x7eu);
  EXPECT_EQ(encode_float(WEFT_FP8_E4M3, 1.0, false), 0x38u);
  EXPECT_EQ(encode_float(WEFT_FP8_E4M3, 600.0, true), 0x7eu);
  EXPECT_EQ(encode_float(WEFT_FP8_E4M3, -600.0, true), 0xfeu);
  EXPECT_EQ(encode_float(WEFT_FP8_E4M3, 464.0, true), 0x7eu);
  EXPECT_EQ(encode_float(WEFT_FP8_E4M3, std::ldexp(1.0, -9), false), 0x01u);
  EXPECT_EQ(encode_float(WEFT_FP8_E5M2, 57344.0, false), 0x7bu);
  EXPECT_EQ(encode_float(WEFT_FP8_E5M2, 1.0, false), 0x3cu);
  EXPECT_EQ(encode_float(WEFT_FP8_E5M2, 1e6, true), 0x7bu);
  EXPECT_EQ(encode_float(WEFT_FP8_E5M2, 1e6, false), 0x7cu);
  EXPECT_EQ(encode_float(WEFT_FP8_E5M2, INFINITY, true), 0x7cu);
  EXPECT_TRUE(std::isnan(decode_float(WEFT_FP8_E4M3, 0x7f)));
  EXPECT_EQ(decode_float(WEFT_FP8_E4M3, 0x7e), 448.0);
  // Every pattern of the 8- and 16-bit formats survives decode -> encode.
  for (weft_dtype_t dt : {WEFT_FP8_E4M3, WEFT_FP8_E5M2, WEFT_FLOAT16, WEFT_BFLOAT16}) {
    const uint64_t n = mpt::dtype_bytes(dt) == 1 ? 256 : 65536;
    for (uint64_t b = 0; b < n; ++b) {
      double v = decode_float(dt, b);
      if (std::isnan(v)) continue;
      ASSERT_EQ(encode_float(dt, v, false), b) << mpt::dtype_name(dt) << " pattern " << b;
    }
  }
  // Ties go to even: 1 + 2^-11 is halfway between two f16 values.
  EXPECT_EQ(encode_float(WEFT_FLOAT16, 1.0 + std::ldexp(1.0, -11), false), 0x3c00u);
  EXPECT_EQ(encode_float(WEFT_FLOAT16, 1.0 + 3 * std::ldexp(1.0, -11), false), 0x3c02u);
}

TEST(Basics, ReferenceReductionRules) {
  using mpt::reduce_reference;
  // int8 sum wraps, avg is the wrapped sum truncated toward zero.
  uint64_t v[3] = {100, 100, 100};  // 300 wraps to 44
  EXPECT_EQ(reduce_reference(WEFT_INT8, WEFT_SUM, v, 3).bits, 44u);
  uint64_t w[2] = {static_cast<uint8_t>(-100), static_cast<uint8_t>(-99)};  // -199 wraps to 57
  EXPECT_EQ(reduce_reference(WEFT_INT8, WEFT_SUM, w, 2).bits, 57u);
  uint64_t a[2] = {static_cast<uint8_t>(-3), 0};  // -3/2 = -1
  EXPECT_EQ(reduce_reference(WEFT_INT8, WEFT_AVG, a, 2).bits, 0xffu);
  // e4m3 saturates
  uint64_t e[2] = {mpt::encode_float(WEFT_FP8_E4M3, 320, false), mpt::encode_float(WEFT_FP8_E4M3, 320, false)};
  EXPECT_EQ(reduce_reference(WEFT_FP8_E4M3, WEFT_SUM, e, 2).bits, 0x7eu);
  EXPECT_EQ(reduce_reference(WEFT_FP8_E4M3, WEFT_AVG, e, 2).bits, mpt::encode_float(WEFT_FP8_E4M3, 320, false));
  // f16 overflows to inf
  uint64_t h[2] = {mpt::encode_float(WEFT_FLOAT16, 40000, false), mpt::encode_float(WEFT_FLOAT16, 40000, false)};
  EXPECT_EQ(reduce_reference(WEFT_FLOAT16, WEFT_SUM, h, 2).bits, 0x7c00u);
  // min with NaN is NaN
  uint64_t m[2] = {mpt::encode_float(WEFT_FLOAT32, 1, false), mpt::encode_float(WEFT_FLOAT32, NAN, false)};
  EXPECT_TRUE(std::isnan(reduce_reference(WEFT_FLOAT32, WEFT_MIN, m, 2).value));
  // u64 prod wraps
  uint64_t p[2] = {uint64_t{1} << 40, uint64_t{1} << 30};
  EXPECT_EQ(reduce_reference(WEFT_UINT64, WEFT_PROD, p, 2).bits, 0u);
}

TEST(Basics, MentionsRank) {
  EXPECT_TRUE(mpt::mentions_rank("allreduce: timed out waiting for rank 1", 1));
  EXPECT_TRUE(mpt::mentions_rank("peer=1 did not answer", 1));
  EXPECT_TRUE(mpt::mentions_rank("ranks 0, 1 never arrived", 1));
  EXPECT_FALSE(mpt::mentions_rank("rank 10 of 12", 1));
  EXPECT_FALSE(mpt::mentions_rank("rank 3 of 1", 1));
  EXPECT_FALSE(mpt::mentions_rank("no rank here 1", 1));
}
