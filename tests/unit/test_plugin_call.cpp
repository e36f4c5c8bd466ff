// weft_plugin_call through libffi and weft_closure_* (weft/plugin.h), through the C ABI: a call of
// every value type with results against references written here, the argument checks (type,
// width, NULL, count) and their messages, closures called by the plugin and directly, a failing
// closure, and calls from 4 threads at once. WEFT_TEST_INJECT=1 (ctest unit.plugin_call_inject)
// corrupts every check once.
#include <gtest/gtest.h>
#include <weft/weft.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "plugin_test_util.h"

using namespace plugin_test;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

class PluginCall : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(weft_plugin_load(WEFT_TEST_PLUGIN_GOOD, &p_), WEFT_OK) << weft_last_error(); }
  void TearDown() override { weft_plugin_destroy(p_); }
  // Calls entry; the result, with its type checked.
  weft_value_t call(const char* entry, std::vector<weft_value_t> args, weft_value_type_t want_type) {
    weft_value_t r = WEFT_VALUE_INIT;
    const weft_status_t st = weft_plugin_call(p_, entry, args.data(), args.size(), &r);
    EXPECT_EQ(st, WEFT_OK) << entry << ": " << weft_last_error();
    check_i64(std::string(entry) + " result type", r.type, want_type);
    return r;
  }
  weft_status_t call_status(const char* entry, std::vector<weft_value_t> args, weft_value_t* r) {
    return weft_plugin_call(p_, entry, args.data(), args.size(), r);
  }
  weft_plugin_t p_ = nullptr;
};

TEST_F(PluginCall, EveryIntegerType) {
  // Each integer type at its extremes: -x and ~x in the type's own width (the references).
  for (int64_t x : {int64_t{-128}, int64_t{-1}, int64_t{0}, int64_t{5}, int64_t{127}}) {
    check_i64("neg_i8(" + std::to_string(x) + ")", call("neg_i8", {val_i(WEFT_TYPE_I8, x)}, WEFT_TYPE_I8).i,
              static_cast<int8_t>(-x));
  }
  for (int64_t x : {int64_t{0}, int64_t{1}, int64_t{200}, int64_t{255}}) {
    check_i64("not_u8(" + std::to_string(x) + ")", call("not_u8", {val_i(WEFT_TYPE_U8, x)}, WEFT_TYPE_U8).i,
              static_cast<uint8_t>(~static_cast<uint8_t>(x)));
  }
  for (int64_t x : {int64_t{-32768}, int64_t{-2}, int64_t{32767}}) {
    check_i64("neg_i16", call("neg_i16", {val_i(WEFT_TYPE_I16, x)}, WEFT_TYPE_I16).i, static_cast<int16_t>(-x));
  }
  for (int64_t x : {int64_t{0}, int64_t{65535}, int64_t{4660}}) {
    check_i64("not_u16", call("not_u16", {val_i(WEFT_TYPE_U16, x)}, WEFT_TYPE_U16).i,
              static_cast<uint16_t>(~static_cast<uint16_t>(x)));
  }
  for (int64_t x : {int64_t{INT32_MIN + 1}, int64_t{-7}, int64_t{INT32_MAX}}) {
    check_i64("neg_i32", call("neg_i32", {val_i(WEFT_TYPE_I32, x)}, WEFT_TYPE_I32).i, -x);
  }
  for (int64_t x : {int64_t{0}, int64_t{UINT32_MAX}, int64_t{0x12345678}}) {
    check_i64("not_u32", call("not_u32", {val_i(WEFT_TYPE_U32, x)}, WEFT_TYPE_U32).i,
              static_cast<uint32_t>(~static_cast<uint32_t>(x)));
  }
  for (int64_t x : {INT64_MIN + 1, int64_t{-9}, INT64_MAX}) {
    check_i64("neg_i64", call("neg_i64", {val_i(WEFT_TYPE_I64, x)}, WEFT_TYPE_I64).i, -x);
  }
  // U64 travels as its bits: ~0 is all ones, -1 in i.
  for (uint64_t x : {uint64_t{0}, uint64_t{1} << 63, UINT64_MAX}) {
    check_i64("not_u64", call("not_u64", {val_i(WEFT_TYPE_U64, static_cast<int64_t>(x))}, WEFT_TYPE_U64).i,
              static_cast<int64_t>(~x));
  }
  check_i64("add_i64", call("add_i64", {val_i(WEFT_TYPE_I64, 1) , val_i(WEFT_TYPE_I64, 1LL << 40)}, WEFT_TYPE_I64).i,
            (1LL << 40) + 1);
}

TEST_F(PluginCall, FloatsPointersStringsTensors) {
  check_f64("half_f32(3)", call("half_f32", {val_f(WEFT_TYPE_F32, 3.0)}, WEFT_TYPE_F32).f, 1.5);
  check_f64("half_f64(-1e300)", call("half_f64", {val_f(WEFT_TYPE_F64, -1e300)}, WEFT_TYPE_F64).f, -0.5e300);
  check_f64("mix3(1, 2, 0.25)",
            call("mix3", {val_i(WEFT_TYPE_I32, 1), val_i(WEFT_TYPE_I64, 2), val_f(WEFT_TYPE_F64, 0.25)}, WEFT_TYPE_F64).f,
            1 + 2 * 2 + 4 * 0.25);
  check_i64("str_len", static_cast<int64_t>(call("str_len", {val_p(WEFT_TYPE_STRING, "weft plugins")}, WEFT_TYPE_SIZE).i),
            12);
  char buf[16];
  check_true("ptr_advance(buf, 5) == buf + 5",
             call("ptr_advance", {val_p(WEFT_TYPE_PTR, buf), val_i(WEFT_TYPE_SIZE, 5)}, WEFT_TYPE_PTR).p == buf + 5);
  const int64_t shape[3] = {2, 3, 7};
  weft_tensor_t t{};
  t.ndim = 3;
  t.shape = shape;
  t.dtype = WEFT_FLOAT32;
  check_i64("tensor_numel", call("tensor_numel", {val_p(WEFT_TYPE_TENSOR, &t)}, WEFT_TYPE_I64).i, 42);
  // Eleven arguments of every kind: integers in registers, floats in vector registers, some on
  // the stack; the reference weighs argument i by i + 1.
  std::vector<weft_value_t> all = {val_i(WEFT_TYPE_I8, -3),      val_i(WEFT_TYPE_U8, 250),  val_i(WEFT_TYPE_I16, -300),
                                   val_i(WEFT_TYPE_U16, 60000),  val_i(WEFT_TYPE_I32, -7),  val_i(WEFT_TYPE_U32, 4000000000),
                                   val_i(WEFT_TYPE_I64, -1000),  val_i(WEFT_TYPE_U64, 99),  val_f(WEFT_TYPE_F32, 0.5),
                                   val_f(WEFT_TYPE_F64, -0.125), val_i(WEFT_TYPE_SIZE, 17)};
  const double want = 1 * -3.0 + 2 * 250.0 + 3 * -300.0 + 4 * 60000.0 + 5 * -7.0 + 6 * 4000000000.0 + 7 * -1000.0 +
                      8 * 99.0 + 9 * 0.5 + 10 * -0.125 + 11 * 17.0;
  check_f64("mix_all", call("mix_all", all, WEFT_TYPE_F64).f, want);
  int32_t flag = 0;
  weft_value_t arg = val_p(WEFT_TYPE_PTR, &flag);
  ASSERT_EQ(weft_plugin_call(p_, "set_flag", &arg, 1, nullptr), WEFT_OK) << weft_last_error();
  check_i64("set_flag (VOID, result NULL)", flag, 42);
  weft_value_t r = val_i(WEFT_TYPE_I64, 7);
  ASSERT_EQ(weft_plugin_call(p_, "set_flag", &arg, 1, &r), WEFT_OK) << weft_last_error();
  check_i64("a VOID result's type", r.type, WEFT_TYPE_VOID);
}

TEST_F(PluginCall, ArgumentChecks) {
  weft_value_t r = WEFT_VALUE_INIT;
  check_refused("F64 where I64 is declared", call_status("add_i64", {val_i(WEFT_TYPE_I64, 1), val_f(WEFT_TYPE_F64, 2)}, &r),
                WEFT_ERR_INVALID_ARGUMENT, {"argument 1 of 'add_i64': expected I64, got F64"});
  check_refused("I32 where TENSOR is declared", call_status("tensor_numel", {val_i(WEFT_TYPE_I32, 1)}, &r),
                WEFT_ERR_INVALID_ARGUMENT, {"argument 0 of 'tensor_numel': expected TENSOR, got I32"});
  check_refused("300 as I8", call_status("neg_i8", {val_i(WEFT_TYPE_I8, 300)}, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"argument 0 of 'neg_i8'", "300 does not fit I8"});
  check_refused("-1 as U32", call_status("not_u32", {val_i(WEFT_TYPE_U32, -1)}, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"-1 does not fit U32"});
  check_refused("65536 as U16", call_status("not_u16", {val_i(WEFT_TYPE_U16, 65536)}, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"65536 does not fit U16"});
  check_refused("1e39 as F32", call_status("half_f32", {val_f(WEFT_TYPE_F32, 1e39)}, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"does not fit F32"});
  check_refused("NULL STRING", call_status("str_len", {val_p(WEFT_TYPE_STRING, nullptr)}, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"argument 0 of 'str_len'", "STRING must not be NULL"});
  check_refused("NULL TENSOR", call_status("tensor_numel", {val_p(WEFT_TYPE_TENSOR, nullptr)}, &r),
                WEFT_ERR_INVALID_ARGUMENT, {"TENSOR must not be NULL"});
  check_refused("NULL FN", call_status("apply_i32", {val_p(WEFT_TYPE_FN, nullptr), val_i(WEFT_TYPE_I32, 1)}, &r),
                WEFT_ERR_INVALID_ARGUMENT, {"argument 0 of 'apply_i32'", "FN must not be NULL"});
  // A C caller may put any int into the type; C++ may not hold it in the enum, so it goes in by bytes.
  weft_value_t odd = val_i(WEFT_TYPE_I64, 1);
  const int ninety_nine = 99;
  std::memcpy(&odd.type, &ninety_nine, sizeof ninety_nine);
  check_refused("a type outside the list", call_status("neg_i64", {odd}, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"expected I64, got type 99"});
  check_refused("too few arguments", call_status("add_i64", {val_i(WEFT_TYPE_I64, 1)}, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"'add_i64' takes 2 arguments", "I64 add_i64(I64, I64)", "nargs = 1"});
  check_refused("NULL result for a non-VOID entry",
                weft_plugin_call(p_, "add_i64", std::vector<weft_value_t>{val_i(WEFT_TYPE_I64, 1), val_i(WEFT_TYPE_I64, 1)}.data(), 2, nullptr),
                WEFT_ERR_INVALID_ARGUMENT, {"result is NULL", "returns I64"});
  check_refused("unknown entry", call_status("nope", {}, &r), WEFT_ERR_INVALID_ARGUMENT, {"no entry 'nope'"});
  check_refused("NULL plugin", weft_plugin_call(nullptr, "add_i64", nullptr, 0, &r), WEFT_ERR_INVALID_ARGUMENT,
                {"plugin is NULL"});
}

// ---------------------------------------------------------------- closures

weft_status_t double_it(const weft_value_t* args, size_t nargs, weft_value_t* result, void* user_data) {
  ++*static_cast<std::atomic<int>*>(user_data);
  if (nargs != 1 || args[0].type != WEFT_TYPE_I32 || result->type != WEFT_TYPE_I32) return WEFT_ERR_INTERNAL;
  result->i = 2 * args[0].i;
  return WEFT_OK;
}

weft_status_t scaled_len(const weft_value_t* args, size_t, weft_value_t* result, void*) {
  result->f = args[0].f * static_cast<double>(std::strlen(static_cast<const char*>(args[1].p)));
  return WEFT_OK;
}

weft_status_t square(const weft_value_t* args, size_t, weft_value_t* result, void*) {
  result->i = args[0].i * args[0].i;
  return WEFT_OK;
}

weft_status_t refuse(const weft_value_t*, size_t, weft_value_t*, void*) { return WEFT_ERR_UNSUPPORTED; }

weft_status_t wrong_type(const weft_value_t*, size_t, weft_value_t* result, void*) {
  result->type = WEFT_TYPE_F64;
  result->f = 1.0;
  return WEFT_OK;
}

TEST_F(PluginCall, ClosuresCalledByThePlugin) {
  std::atomic<int> calls{0};
  const weft_value_type_t i32[1] = {WEFT_TYPE_I32};
  weft_closure_t c = nullptr;
  void* fn = nullptr;
  ASSERT_EQ(weft_closure_create(WEFT_TYPE_I32, i32, 1, double_it, &calls, &c, &fn), WEFT_OK) << weft_last_error();
  check_i64("apply_i32(double_it, 21)",
            call("apply_i32", {val_p(WEFT_TYPE_FN, fn), val_i(WEFT_TYPE_I32, 21)}, WEFT_TYPE_I32).i, 2 * 21 + 1);
  check_i64("apply_i32(double_it, -5)",
            call("apply_i32", {val_p(WEFT_TYPE_FN, fn), val_i(WEFT_TYPE_I32, -5)}, WEFT_TYPE_I32).i, -10 + 1);
  // Called directly from C++ as the C function it is.
  auto direct = reinterpret_cast<int32_t (*)(int32_t)>(fn);
  check_i64("double_it called directly", direct(1000), 2000);
  check_i64("handler calls", calls.load(), 3);
  uint64_t failures = 9;
  const char* msg = nullptr;
  ASSERT_EQ(weft_closure_error(c, &failures, &msg), WEFT_OK);
  check_i64("failures of a closure that never failed", static_cast<int64_t>(failures), 0);
  EXPECT_EQ(weft_closure_destroy(c), WEFT_OK);

  const weft_value_type_t fs[2] = {WEFT_TYPE_F64, WEFT_TYPE_STRING};
  ASSERT_EQ(weft_closure_create(WEFT_TYPE_F64, fs, 2, scaled_len, nullptr, &c, &fn), WEFT_OK) << weft_last_error();
  check_f64("apply_mixed(scaled_len, 0.75, \"abcd\")",
            call("apply_mixed", {val_p(WEFT_TYPE_FN, fn), val_f(WEFT_TYPE_F64, 0.75), val_p(WEFT_TYPE_STRING, "abcd")},
                 WEFT_TYPE_F64).f,
            2 * 0.75 * 4);
  weft_closure_destroy(c);

  const weft_value_type_t i64[1] = {WEFT_TYPE_I64};
  ASSERT_EQ(weft_closure_create(WEFT_TYPE_I64, i64, 1, square, nullptr, &c, &fn), WEFT_OK) << weft_last_error();
  int64_t want = 0;
  for (int64_t i = 0; i < 1000; ++i) want += i * i;
  check_i64("sum_cb(square, 1000)", call("sum_cb", {val_p(WEFT_TYPE_FN, fn), val_i(WEFT_TYPE_I64, 1000)}, WEFT_TYPE_I64).i,
            want);
  weft_closure_destroy(c);
}

TEST_F(PluginCall, FailingClosures) {
  const weft_value_type_t i32[1] = {WEFT_TYPE_I32};
  weft_closure_t c = nullptr;
  void* fn = nullptr;
  ASSERT_EQ(weft_closure_create(WEFT_TYPE_I32, i32, 1, refuse, nullptr, &c, &fn), WEFT_OK);
  // The closure returns 0 when its handler fails, so apply_i32 returns 0 + 1.
  check_i64("apply_i32 with a failing closure", call("apply_i32", {val_p(WEFT_TYPE_FN, fn), val_i(WEFT_TYPE_I32, 3)}, WEFT_TYPE_I32).i, 1);
  check_i64("apply_i32 with a failing closure, again", call("apply_i32", {val_p(WEFT_TYPE_FN, fn), val_i(WEFT_TYPE_I32, 4)}, WEFT_TYPE_I32).i, 1);
  uint64_t failures = 0;
  const char* msg = nullptr;
  ASSERT_EQ(weft_closure_error(c, &failures, &msg), WEFT_OK);
  check_i64("failures counted", static_cast<int64_t>(failures), 2);
  check_true("the failure's message names the status", msg && std::strstr(msg, "WEFT_ERR_UNSUPPORTED"), msg ? msg : "NULL");
  weft_closure_destroy(c);

  ASSERT_EQ(weft_closure_create(WEFT_TYPE_I32, i32, 1, wrong_type, nullptr, &c, &fn), WEFT_OK);
  check_i64("a closure whose result has the wrong type returns 0", reinterpret_cast<int32_t (*)(int32_t)>(fn)(5), 0);
  ASSERT_EQ(weft_closure_error(c, &failures, &msg), WEFT_OK);
  check_i64("wrong result type counted", static_cast<int64_t>(failures), 1);
  check_true("the message names both types", msg && std::strstr(msg, "F64") && std::strstr(msg, "returns I32"), msg ? msg : "");
  weft_closure_destroy(c);
  const weft_closure_t dead = c;

  const weft_value_type_t bad[2] = {WEFT_TYPE_I32, WEFT_TYPE_VOID};
  check_refused("VOID as a closure argument", weft_closure_create(WEFT_TYPE_I32, bad, 2, square, nullptr, &c, &fn),
                WEFT_ERR_INVALID_ARGUMENT, {"args[1] = 0", "VOID is a return type only"});
  check_refused("NULL handler", weft_closure_create(WEFT_TYPE_I32, i32, 1, nullptr, nullptr, &c, &fn),
                WEFT_ERR_INVALID_ARGUMENT, {"handler is NULL"});
  check_refused("closure_error of a destroyed closure", weft_closure_error(dead, &failures, &msg), WEFT_ERR_INVALID_ARGUMENT,
                {"closure", "destroyed"});
}

// 4 threads calling at once, each through its own closure and the shared plugin handle.
TEST_F(PluginCall, FourThreads) {
  std::vector<std::thread> threads;
  std::vector<int64_t> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t, &bad] {
      const weft_value_type_t i64[1] = {WEFT_TYPE_I64};
      weft_closure_t c = nullptr;
      void* fn = nullptr;
      if (weft_closure_create(WEFT_TYPE_I64, i64, 1, square, nullptr, &c, &fn) != WEFT_OK) {
        bad[t] = -1;
        return;
      }
      for (int64_t n = 0; n < 2000; ++n) {
        weft_value_t args[2] = {val_p(WEFT_TYPE_FN, fn), val_i(WEFT_TYPE_I64, n % 50 + t)}, r = WEFT_VALUE_INIT;
        const int64_t m = n % 50 + t;
        if (weft_plugin_call(p_, "sum_cb", args, 2, &r) != WEFT_OK || r.i != (m - 1) * m * (2 * m - 1) / 6) ++bad[t];
        weft_value_t add[2] = {val_i(WEFT_TYPE_I64, n), val_i(WEFT_TYPE_I64, t)};
        if (weft_plugin_call(p_, "add_i64", add, 2, &r) != WEFT_OK || r.i != n + t) ++bad[t];
      }
      weft_closure_destroy(c);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) check_i64("thread " + std::to_string(t) + " wrong or failed calls", bad[t], 0);
}

}  // namespace
