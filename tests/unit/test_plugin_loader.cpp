// Loading plugins through the C ABI (weft/plugin.h): the good fixture's manifest as weft reads it
// (every entry's kind, signature, dtypes and id), loading twice, every way a plugin must be
// refused (status and a message naming what was expected; the process unharmed), the kinds'
// registration (through core's registry, with references written here), WEFT_PLUGINS at
// communicator creation (in a child process), and loads and calls from 4 threads at once.
// WEFT_TEST_INJECT=1 (ctest unit.plugin_loader_inject) corrupts every check once.
#include <gtest/gtest.h>
#include <weft/weft.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <algorithm>

#include "core/common/status.h"
#include "core/plugin/loader.h"
#include "core/plugin/registry.h"
#include "plugin_test_util.h"

using namespace plugin_test;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

struct Expected {
  const char* name;
  weft_plugin_kind_t kind;
  const char* signature;  // "RET(ARGS)" in weft-info's words
};

// tests/plugins/manifests/test_good.json, written out again by hand.
const Expected kGood[] = {
    {"add_i64", WEFT_PLUGIN_FUNCTION, "I64(I64,I64)"},
    {"mix3", WEFT_PLUGIN_FUNCTION, "F64(I32,I64,F64)"},
    {"neg_i8", WEFT_PLUGIN_FUNCTION, "I8(I8)"},
    {"not_u8", WEFT_PLUGIN_FUNCTION, "U8(U8)"},
    {"neg_i16", WEFT_PLUGIN_FUNCTION, "I16(I16)"},
    {"not_u16", WEFT_PLUGIN_FUNCTION, "U16(U16)"},
    {"neg_i32", WEFT_PLUGIN_FUNCTION, "I32(I32)"},
    {"not_u32", WEFT_PLUGIN_FUNCTION, "U32(U32)"},
    {"neg_i64", WEFT_PLUGIN_FUNCTION, "I64(I64)"},
    {"not_u64", WEFT_PLUGIN_FUNCTION, "U64(U64)"},
    {"half_f32", WEFT_PLUGIN_FUNCTION, "F32(F32)"},
    {"half_f64", WEFT_PLUGIN_FUNCTION, "F64(F64)"},
    {"str_len", WEFT_PLUGIN_FUNCTION, "SIZE(STRING)"},
    {"ptr_advance", WEFT_PLUGIN_FUNCTION, "PTR(PTR,SIZE)"},
    {"tensor_numel", WEFT_PLUGIN_FUNCTION, "I64(TENSOR)"},
    {"mix_all", WEFT_PLUGIN_FUNCTION, "F64(I8,U8,I16,U16,I32,U32,I64,U64,F32,F64,SIZE)"},
    {"apply_i32", WEFT_PLUGIN_FUNCTION, "I32(FN,I32)"},
    {"apply_mixed", WEFT_PLUGIN_FUNCTION, "F64(FN,F64,STRING)"},
    {"sum_cb", WEFT_PLUGIN_FUNCTION, "I64(FN,I64)"},
    {"set_flag", WEFT_PLUGIN_FUNCTION, "VOID(PTR)"},
    {"absmax", WEFT_PLUGIN_REDUCE_OP, "I32(PTR,PTR,PTR,SIZE,I32)"},
    {"trunc16.bytes", WEFT_PLUGIN_CODEC_BYTES, "SIZE(SIZE)"},
    {"trunc16.encode", WEFT_PLUGIN_CODEC_ENCODE, "I32(PTR,SIZE,PTR)"},
    {"trunc16.decode", WEFT_PLUGIN_CODEC_DECODE, "I32(PTR,SIZE,PTR)"},
    {"highest", WEFT_PLUGIN_ROUTER, "I32(PTR,SIZE,I32,I32,PTR)"},
    {"gpipe_like", WEFT_PLUGIN_SCHEDULE, "I32(I32,I32,I32,PTR,SIZE,PTR,PTR)"},
    {"linear", WEFT_PLUGIN_COST_MODEL, "F64(I32,I32,I32,I32,I32)"},
};
constexpr size_t kNumGood = sizeof kGood / sizeof kGood[0];

std::string signature(const weft_plugin_entry_t& e) {
  static const char* names[] = {"VOID", "I8",  "U8",  "I16", "U16",  "I32",    "U32",    "I64",
                                "U64",  "F32", "F64", "PTR", "SIZE", "TENSOR", "STRING", "FN"};
  std::string s = std::string(names[e.ret]) + "(";
  for (size_t i = 0; i < e.nargs; ++i) s += std::string(i ? "," : "") + names[e.args[i]];
  return s + ")";
}

weft_plugin_t load_good() {
  weft_plugin_t p = nullptr;
  EXPECT_EQ(weft_plugin_load(WEFT_TEST_PLUGIN_GOOD, &p), WEFT_OK) << weft_last_error();
  return p;
}

TEST(PluginLoader, GoodManifest) {
  weft_plugin_t p = load_good();
  ASSERT_NE(p, nullptr);
  weft_plugin_info_t info = WEFT_PLUGIN_INFO_INIT;
  ASSERT_EQ(weft_plugin_info(p, &info), WEFT_OK) << weft_last_error();
  check_str("info.name", info.name, "weft_test_good");
  check_str("info.version", info.version, "1.2.3 test");
  check_str("info.path", info.path, WEFT_TEST_PLUGIN_GOOD);
  check_i64("info.abi_major", info.abi_major, 1);
  check_i64("info.abi_minor", info.abi_minor, 0);
  check_i64("info.nentries", static_cast<int64_t>(info.nentries), kNumGood);
  int codec_id = -2;
  for (size_t i = 0; i < kNumGood && i < info.nentries; ++i) {
    weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
    ASSERT_EQ(weft_plugin_entry(p, i, &e), WEFT_OK) << weft_last_error();
    const std::string at = "entry " + std::to_string(i);
    check_str(at + " name", e.name, kGood[i].name);
    check_i64(at + " kind", e.kind, kGood[i].kind);
    check_str(at + " signature", signature(e), kGood[i].signature);
    check_true(at + " symbol", std::strncmp(e.symbol, "tp_", 3) == 0, e.symbol);
    check_true(at + " doc", e.doc && std::strlen(e.doc) > 0);
    if (e.kind == WEFT_PLUGIN_FUNCTION) {
      check_i64(at + " id (FUNCTION)", e.id, -1);
    } else {
      check_true(at + " id >= WEFT_PLUGIN_ID_BASE", e.id >= WEFT_PLUGIN_ID_BASE, std::to_string(e.id));
    }
    if (e.kind == WEFT_PLUGIN_REDUCE_OP) {
      check_i64("absmax ndtypes", static_cast<int64_t>(e.ndtypes), 2);
      if (e.ndtypes == 2) {
        check_i64("absmax dtypes[0]", e.dtypes[0], WEFT_FLOAT32);
        check_i64("absmax dtypes[1]", e.dtypes[1], WEFT_INT32);
      }
    } else {
      check_i64(at + " ndtypes", static_cast<int64_t>(e.ndtypes), 0);
    }
    if (e.kind >= WEFT_PLUGIN_CODEC_BYTES && e.kind <= WEFT_PLUGIN_CODEC_DECODE) {
      if (codec_id == -2) codec_id = e.id;
      check_i64(at + ": a codec's parts share one id", e.id, codec_id);
    }
  }
  weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
  check_refused("entry index out of range", weft_plugin_entry(p, kNumGood, &e), WEFT_ERR_INVALID_ARGUMENT,
                {"index = 27", "27 entries"});
  ASSERT_EQ(weft_plugin_lookup(p, "highest", &e), WEFT_OK) << weft_last_error();
  check_str("lookup('highest').symbol", e.symbol, "tp_router_highest");
  check_refused("lookup of an unknown name", weft_plugin_lookup(p, "nope", &e), WEFT_ERR_INVALID_ARGUMENT,
                {"no entry 'nope'", "add_i64", "linear"});
  EXPECT_EQ(weft_plugin_destroy(p), WEFT_OK);
  weft_plugin_info_t again = WEFT_PLUGIN_INFO_INIT;
  check_refused("info of a destroyed handle", weft_plugin_info(p, &again), WEFT_ERR_INVALID_ARGUMENT,
                {"plugin", "destroyed"});
}

// A second load of the same file is a new handle to the same plugin: nothing registered twice.
TEST(PluginLoader, LoadTwiceRegistersOnce) {
  weft_plugin_t a = load_good(), b = load_good();
  ASSERT_TRUE(a && b);
  check_true("two loads give two handles", a != b);
  for (size_t i = 20; i < kNumGood; ++i) {
    weft_plugin_entry_t ea = WEFT_PLUGIN_ENTRY_INIT, eb = WEFT_PLUGIN_ENTRY_INIT;
    ASSERT_EQ(weft_plugin_entry(a, i, &ea), WEFT_OK);
    ASSERT_EQ(weft_plugin_entry(b, i, &eb), WEFT_OK);
    check_i64(std::string("the id of ") + kGood[i].name + " on the second load", eb.id, ea.id);
  }
  weft_plugin_destroy(a);
  weft_plugin_destroy(b);
  EXPECT_EQ(weft_plugin_destroy(nullptr), WEFT_OK);
}

struct Bad {
  const char* path;
  weft_status_t status;
  std::initializer_list<const char*> parts;
};

TEST(PluginLoader, BadPluginsAreRefused) {
  const Bad bad[] = {
      {WEFT_TEST_PLUGIN_BAD_ABI2, WEFT_ERR_MISMATCH, {"bad_abi2", "built for plugin ABI 2.0, this weft has 1.0"}},
      {WEFT_TEST_PLUGIN_BAD_TRUNCATE, WEFT_ERR_INVALID_ARGUMENT, {"bad_truncate", "FlatBuffers verifier"}},
      {WEFT_TEST_PLUGIN_BAD_LYING_KIND, WEFT_ERR_INVALID_ARGUMENT,
       {"entry 0 ('liar')", "must be I32(PTR, PTR, PTR, SIZE, I32)", "declares I32(PTR, PTR, SIZE)"}},
      {WEFT_TEST_PLUGIN_BAD_MISSING_SYMBOL, WEFT_ERR_INVALID_ARGUMENT,
       {"entry 1 ('ghost')", "'tp_not_defined_anywhere' is not exported"}},
      {WEFT_TEST_PLUGIN_BAD_DATA_SYMBOL, WEFT_ERR_INVALID_ARGUMENT,
       {"entry 0 ('data')", "'tp_bad_data_object'", "not a function", "STT_FUNC"}},
      {WEFT_TEST_PLUGIN_BAD_DUPLICATE, WEFT_ERR_INVALID_ARGUMENT, {"duplicate entry name 'twice'"}},
      {WEFT_TEST_PLUGIN_BAD_UNKNOWN_KIND, WEFT_ERR_INVALID_ARGUMENT, {"entry 0 ('strange')", "unknown kind 9"}},
      {WEFT_TEST_PLUGIN_NO_MANIFEST, WEFT_ERR_INVALID_ARGUMENT, {"no_manifest", "does not export weft_plugin_manifest"}},
      {WEFT_TEST_PLUGIN_BAD_IDENTIFIER, WEFT_ERR_INVALID_ARGUMENT, {"file identifier is \"XXXX\"", "expected \"WFPM\""}},
      {"/nonexistent/libnothing.so", WEFT_ERR_INVALID_ARGUMENT, {"/nonexistent/libnothing.so", "cannot load"}},
  };
  // Twice each: a refused plugin registers nothing and is checked again (and refused again).
  for (int round = 0; round < 2; ++round) {
    for (const Bad& b : bad) {
      weft_plugin_t p = reinterpret_cast<weft_plugin_t>(0x1);
      const weft_status_t st = weft_plugin_load(b.path, &p);
      check_refused(std::string("load ") + b.path, st, b.status, b.parts);
      check_true(std::string("*plugin is NULL after refusing ") + b.path, p == nullptr);
    }
  }
  weft_plugin_t p = nullptr;
  check_refused("NULL path", weft_plugin_load(nullptr, &p), WEFT_ERR_INVALID_ARGUMENT, {"path is NULL"});
  check_refused("empty path", weft_plugin_load("", &p), WEFT_ERR_INVALID_ARGUMENT, {"path is empty"});
  // The process is unharmed: the good plugin still loads and calls.
  p = load_good();
  weft_value_t args[2] = {val_i(WEFT_TYPE_I64, 40), val_i(WEFT_TYPE_I64, 2)}, r = WEFT_VALUE_INIT;
  ASSERT_EQ(weft_plugin_call(p, "add_i64", args, 2, &r), WEFT_OK) << weft_last_error();
  check_i64("add_i64 after the refusals", r.i, 42);
  weft_plugin_destroy(p);
}

// The kinds reach core's registry, and what is registered computes what the test's references do.
// (core's load_plugin, linked into this test: libweft's registry is not reachable from here.)
TEST(PluginLoader, KindsAreRegistered) {
  const weft::plugin::LoadedPlugin& lp = weft::plugin::load_plugin(WEFT_TEST_PLUGIN_GOOD);
  const weft::plugin::LoadedPlugin& again = weft::plugin::load_plugin(WEFT_TEST_PLUGIN_GOOD);
  check_true("core: the same file loads as the same plugin", &lp == &again);

  auto op = weft::plugin::find_op(lp.get("absmax").id);
  ASSERT_TRUE(op);
  check_true("absmax takes FLOAT32 and INT32 only",
             op->takes(weft::DType::f32) && op->takes(weft::DType::i32) && !op->takes(weft::DType::f64));
  const std::vector<float> a = {-3.5f, 2.0f, 0.0f, -0.25f}, b = {1.0f, -7.0f, -0.5f, 0.125f};
  std::vector<float> dst(4);
  op->apply(dst.data(), a.data(), b.data(), 4, weft::DType::f32);
  for (size_t i = 0; i < 4; ++i) check_f64("absmax[" + std::to_string(i) + "]", dst[i], std::max(std::fabs(a[i]), std::fabs(b[i])));
  try {
    op->apply(dst.data(), a.data(), b.data(), 4, weft::DType::f64);
    check_true("absmax refuses FLOAT64 through apply", false);
  } catch (const weft::Error& e) {
    check_true("absmax's refusal names the operator", std::string(e.what()).find("'absmax'") != std::string::npos, e.what());
  }

  auto codec = weft::plugin::find_codec(lp.get("trunc16.encode").id);
  ASSERT_TRUE(codec && codec->bytes && codec->encode && codec->decode);
  check_str("codec origin", codec->origin.name, "trunc16");
  check_i64("trunc16.bytes(10)", static_cast<int64_t>(codec->bytes(10)), 20);
  const std::vector<float> x = {1.0f, -2.5f, 3.14159f, 1e-3f};
  std::vector<uint16_t> wire(4);
  std::vector<float> back(4);
  ASSERT_EQ(codec->encode(x.data(), 4, wire.data()), 0);
  ASSERT_EQ(codec->decode(wire.data(), 4, back.data()), 0);
  for (size_t i = 0; i < 4; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    bits &= 0xffff0000u;  // the reference: the low half of the bits dropped
    float want;
    std::memcpy(&want, &bits, 4);
    check_f64("trunc16 round trip[" + std::to_string(i) + "]", back[i], want);
  }

  auto router = weft::plugin::find_router(lp.get("highest").id);
  ASSERT_TRUE(router);
  const std::vector<float> scores = {0.1f, 0.9f, 0.5f, 0.7f, /* token 1 */ 0.3f, 0.3f, 0.2f, 0.8f};
  std::vector<int32_t> idx(4);
  ASSERT_EQ(router->select(scores.data(), 2, 4, 2, idx.data()), 0);
  const int32_t want_idx[4] = {1, 3, 3, 0};
  for (size_t i = 0; i < 4; ++i) check_i64("router index " + std::to_string(i), idx[i], want_idx[i]);

  auto sched = weft::plugin::find_schedule(lp.get("gpipe_like").id);
  ASSERT_TRUE(sched);
  std::vector<int32_t> actions(3 * 2 * 2 * 3);
  std::vector<size_t> counts(2);
  std::vector<int32_t> stage_rank(2);
  ASSERT_EQ(sched->generate(2, 3, 1, actions.data(), 12, counts.data(), stage_rank.data()), 0);
  check_i64("schedule counts[1]", static_cast<int64_t>(counts[1]), 6);
  check_i64("schedule rank 1 action 4 (B of micro-batch 1)", actions[(6 + 4) * 3] * 100 + actions[(6 + 4) * 3 + 1] * 10 + actions[(6 + 4) * 3 + 2], 111);

  auto cost = weft::plugin::find_cost_model(lp.get("linear").id);
  ASSERT_TRUE(cost);
  check_f64("cost F of stage 5, 4 samples", cost->cost(0, 5, 8, 0, 4), 1.5 * 4);
  check_f64("cost B, 3 samples", cost->cost(1, 0, 8, 2, 3), 6.0);
}

// WEFT_PLUGINS: this test binary again as a child (the variable must be set before the first
// communicator of a process), with a good list and with a failing one.
TEST(PluginLoader, WeftPluginsAtCommCreation) {
  const std::string self = "/proc/" + std::to_string(getpid()) + "/exe";
  struct Run {
    const char* mode;
    std::string list;
  } runs[] = {{"ok", WEFT_TEST_PLUGIN_GOOD}, {"fail", std::string(WEFT_TEST_PLUGIN_GOOD) + ":" + WEFT_TEST_PLUGIN_BAD_ABI2}};
  for (const Run& r : runs) {
    const std::string cmd = "WEFT_TEST_INJECT=0 WEFT_TEST_PLUGIN_CHILD=" + std::string(r.mode) + " WEFT_PLUGINS='" +
                            r.list + "' " + self + " --gtest_filter=PluginLoaderChild.* 2>&1";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    const int rc = pclose(f);
    check_true(std::string("WEFT_PLUGINS child (") + r.mode + ") passed", rc == 0 && out.find("[  PASSED  ] 1 test") != std::string::npos, out);
  }
}

// The child's half: skipped unless WeftPluginsAtCommCreation started this process.
TEST(PluginLoaderChild, CommCreation) {
  const char* mode = std::getenv("WEFT_TEST_PLUGIN_CHILD");
  if (!mode) GTEST_SKIP() << "run by PluginLoader.WeftPluginsAtCommCreation";
  weft_unique_id_t id;
  ASSERT_EQ(weft_get_unique_id(&id), WEFT_OK) << weft_last_error();
  for (int attempt = 0; attempt < 2; ++attempt) {
    weft_comm_t comm = nullptr;
    const weft_status_t st = weft_comm_init(&comm, &id, 0, 1, nullptr);
    if (std::strcmp(mode, "ok") == 0) {
      ASSERT_EQ(st, WEFT_OK) << weft_last_error();
      weft_comm_destroy(comm);
      // The plugin came in with the communicator: a load now finds it registered already.
      weft_plugin_t p = nullptr;
      ASSERT_EQ(weft_plugin_load(WEFT_TEST_PLUGIN_GOOD, &p), WEFT_OK);
      weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
      ASSERT_EQ(weft_plugin_lookup(p, "absmax", &e), WEFT_OK);
      EXPECT_EQ(e.id, WEFT_PLUGIN_ID_BASE);
      weft_plugin_destroy(p);
      return;
    }
    // Every creation fails with the failing path's error, not only the first.
    EXPECT_EQ(st, WEFT_ERR_MISMATCH);
    EXPECT_NE(std::string(weft_last_error()).find("WEFT_PLUGINS: plugin '" WEFT_TEST_PLUGIN_BAD_ABI2 "': built for plugin ABI 2.0"), std::string::npos) << weft_last_error();
    EXPECT_EQ(comm, nullptr);
  }
}

// Loads, lookups and calls from 4 threads at once: every result right.
TEST(PluginLoader, FourThreads) {
  std::vector<std::thread> threads;
  std::vector<int64_t> wrong(4, 0), failed(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong, &failed] {
      weft_plugin_t p = nullptr;
      if (weft_plugin_load(WEFT_TEST_PLUGIN_GOOD, &p) != WEFT_OK) {
        failed[t] = 1;
        return;
      }
      for (int64_t i = 0; i < 20000; ++i) {
        weft_value_t args[2] = {val_i(WEFT_TYPE_I64, i), val_i(WEFT_TYPE_I64, t * 1000003)}, r = WEFT_VALUE_INIT;
        if (weft_plugin_call(p, "add_i64", args, 2, &r) != WEFT_OK) ++failed[t];
        else if (r.type != WEFT_TYPE_I64 || r.i != i + t * 1000003) ++wrong[t];
      }
      weft_plugin_destroy(p);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    check_i64("thread " + std::to_string(t) + " failed calls", failed[t], 0);
    check_i64("thread " + std::to_string(t) + " wrong results", wrong[t], 0);
  }
}

}  // namespace
