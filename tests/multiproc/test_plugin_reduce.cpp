// Custom reduction operators (weft/plugin.h) in the host collectives: absmax, logsumexp and
// sum_f32 from the C plugin plugins/c_reduce (loaded with weft_plugin_load, or by WEFT_PLUGINS
// when the world communicator is created, on an otherwise unchanged call path), and a bitwise-or
// operator made here with weft_op_create. allreduce, reduce at every root and reduce_scatter,
// blocking and asynchronous, sizes 0, 1, odd and ~1M elements, every dtype each operator takes
// plus float16/bfloat16 (widened to float32 by weft), checked against the single-process
// reference below (never weft's or the plugin's own code). Then bad input (unknown, destroyed
// and wrongly typed operators) and an operator that fails.
//
// Tolerances (u = 2^-24 when the operator runs in float32, 2^-53 in float64):
//  - absmax and bitwise or: exact (the result is one input's magnitude, or the OR of the bits).
//  - logsumexp: the plugin's bound (plugins/c_reduce/reduce_ops.c): n - 1 merges in any order
//    stay within (n - 1) * u * (M + 3), M the largest |value| among inputs and result;
//    widened types add half a spacing of the narrow format at the result (one final rounding).
//  - sum_f32: (n - 1) * u * sum|x| (each of the n - 1 additions rounds a partial sum whose
//    magnitude is at most sum|x|).
// The reference runs in long double, whose own error (< 2^-60 relative here) is added.
//
// Environment: WEFT_TEST_C_REDUCE = the plugin's path; WEFT_PLUGINS set = the plugin was loaded
// at communicator creation (ids 64, 65, 66 in manifest order: absmax, logsumexp, sum_f32).
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "inject.h"
#include "inputs.h"
#include "mp_gtest.h"
#include "reference.h"

using mpt::g_world;

namespace {

enum class Kind { absmax, logsumexp, sum, bitor_ };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::absmax: return "absmax";
    case Kind::logsumexp: return "logsumexp";
    case Kind::sum: return "sum_f32";
    case Kind::bitor_: return "bitor";
  }
  return "?";
}

// ---------------------------------------------------------------- the operators under test

weft_op_t op_of_id(int id) {
  weft_op_t o;
  std::memcpy(&o, &id, sizeof o);  // ids lie past weft_op_t's enumerators
  return o;
}
int id_of(weft_op_t o) {
  int v;
  std::memcpy(&v, &o, sizeof v);
  return v;
}

std::atomic<long> g_or_calls{0};

// The weft_op_create operator: dst = a | b for the integer types; counts its calls through
// user_data (proof that user_data arrives and that weft calls once per chunk, not per element).
weft_status_t bitor_fn(void* dst, const void* a, const void* b, size_t count, weft_dtype_t dt, void* user_data) {
  static_cast<std::atomic<long>*>(user_data)->fetch_add(1);
  const size_t w = mpt::dtype_bytes(dt);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < count * w; ++i) d[i] = static_cast<unsigned char>(x[i] | y[i]);
  return WEFT_OK;
}

weft_status_t failing_fn(void*, const void*, const void*, size_t, weft_dtype_t, void*) {
  return WEFT_ERR_INVALID_ARGUMENT;
}

struct Ops {
  bool ready = false;
  weft_op_t absmax{}, logsumexp{}, sum{}, bitor_{};
  weft_op_t of(Kind k) const {
    return k == Kind::absmax ? absmax : k == Kind::logsumexp ? logsumexp : k == Kind::sum ? sum : bitor_;
  }
};
Ops g_ops;

const char* plugin_path() {
  const char* p = std::getenv("WEFT_TEST_C_REDUCE");
  if (!p || !*p) mpt::die("WEFT_TEST_C_REDUCE is not set (the path of libweft_c_reduce.so)");
  return p;
}

int entry_id(weft_plugin_t p, const char* name) {
  weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
  MPT_OK(weft_plugin_lookup(p, name, &e));
  if (e.kind != WEFT_PLUGIN_REDUCE_OP) mpt::die("entry %s is not a REDUCE_OP", name);
  return e.id;
}

// Loads (or, under WEFT_PLUGINS, finds) the plugin's operators and creates the bitor operator,
// the same way on every rank so the ids agree.
const Ops& ops() {
  if (g_ops.ready) return g_ops;
  const bool via_env = std::getenv("WEFT_PLUGINS") != nullptr;
  if (via_env) {
    // The unchanged call path: the ids WEFT_PLUGINS gave out, in manifest order from 64.
    g_ops.absmax = op_of_id(WEFT_PLUGIN_ID_BASE);
    g_ops.logsumexp = op_of_id(WEFT_PLUGIN_ID_BASE + 1);
    g_ops.sum = op_of_id(WEFT_PLUGIN_ID_BASE + 2);
  }
  weft_plugin_t p = nullptr;
  MPT_OK(weft_plugin_load(plugin_path(), &p));  // under WEFT_PLUGINS: the same plugin again
  const int ids[3] = {entry_id(p, "absmax"), entry_id(p, "logsumexp"), entry_id(p, "sum_f32")};
  if (via_env && (ids[0] != id_of(g_ops.absmax) || ids[1] != id_of(g_ops.logsumexp) || ids[2] != id_of(g_ops.sum))) {
    mpt::die("WEFT_PLUGINS gave ids %d %d %d; expected 64 65 66", ids[0], ids[1], ids[2]);
  }
  g_ops.absmax = op_of_id(ids[0]);
  g_ops.logsumexp = op_of_id(ids[1]);
  g_ops.sum = op_of_id(ids[2]);
  MPT_OK(weft_plugin_destroy(p));  // the operators stay registered
  const weft_dtype_t int_types[3] = {WEFT_INT32, WEFT_INT64, WEFT_UINT8};
  weft_op_config_t c = WEFT_OP_CONFIG_INIT;
  c.name = "bitor";
  c.fn = bitor_fn;
  c.user_data = &g_or_calls;
  c.dtypes = int_types;
  c.ndtypes = 3;
  MPT_OK(weft_op_create(&c, &g_ops.bitor_));
  g_ops.ready = true;
  return g_ops;
}

// ---------------------------------------------------------------- inputs and the reference

std::vector<weft_dtype_t> dtypes_of(Kind k) {
  switch (k) {
    case Kind::absmax: return {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_INT32, WEFT_INT64, WEFT_FLOAT16, WEFT_BFLOAT16};
    case Kind::logsumexp: return {WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FLOAT16, WEFT_BFLOAT16};
    case Kind::sum: return {WEFT_FLOAT32, WEFT_BFLOAT16};
    case Kind::bitor_: return {WEFT_INT32, WEFT_INT64, WEFT_UINT8};
  }
  return {};
}

// Rank r's element i (its global index in the collective's input), as the format's bits.
uint64_t input_bits(Kind k, weft_dtype_t dt, int rank, size_t i) {
  const uint64_t h = mpt::hash3(mpt::hash_str(kind_name(k)) + static_cast<uint64_t>(dt), static_cast<uint64_t>(rank), i);
  if (!mpt::is_float(dt)) return h;  // store_bits keeps the low bits
  double v = 0;
  if (k == Kind::logsumexp) {
    v = ((h >> 8) % 4001 - 2000.0) / 100.0;  // [-20, 20]
    if ((h >> 40) % 211 == 0) v = -INFINITY;  // exp(v) = 0: the m = -inf branch when all are
  } else {
    v = ((h >> 8) % 20001 - 10000.0) / 64.0;  // [-156, 156], signs and zeros
  }
  return mpt::encode_float(dt, v, false);
}

long double value_of(weft_dtype_t dt, uint64_t bits) { return mpt::decode_float(dt, bits); }

// The width-bit magnitude of a two's-complement value (|INT_MIN| = 2^(w-1) as the plugin has it).
uint64_t magnitude(uint64_t bits, int w) {
  const uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
  bits &= mask;
  const bool negative = (bits >> (w - 1)) & 1;
  return negative ? (0 - bits) & mask : bits;
}

struct Expect {
  uint64_t bits = 0;    // exact kinds
  long double value = 0;  // toleranced kinds
  long double bound = 0;
};

double unit_roundoff(weft_dtype_t dt) { return dt == WEFT_FLOAT64 ? 0x1p-53 : 0x1p-24; }

Expect reference(Kind k, weft_dtype_t dt, int n, size_t i) {
  Expect e;
  // A reduction of one value applies the operator zero times: the value itself (absmax's result
  // is a magnitude only once two values met).
  if (n == 1 && k == Kind::absmax) {
    e.bits = input_bits(k, dt, 0, i);
    return e;
  }
  if (k == Kind::bitor_) {
    for (int r = 0; r < n; ++r) e.bits |= input_bits(k, dt, r, i);
    return e;
  }
  if (k == Kind::absmax && !mpt::is_float(dt)) {
    const int w = mpt::int_bits(dt);
    for (int r = 0; r < n; ++r) e.bits = std::max(e.bits, magnitude(input_bits(k, dt, r, i), w));
    return e;
  }
  if (k == Kind::absmax) {
    long double m = 0;
    for (int r = 0; r < n; ++r) m = std::max(m, std::fabs(value_of(dt, input_bits(k, dt, r, i))));
    e.bits = mpt::encode_float(dt, static_cast<double>(m), false);  // an input's magnitude: exact
    return e;
  }
  const long double u = unit_roundoff(dt);
  long double big = 0;  // M of the bound: the largest finite |value| among inputs and result
  if (k == Kind::sum) {
    long double s = 0, abs_sum = 0;
    for (int r = 0; r < n; ++r) {
      const long double x = value_of(dt, input_bits(k, dt, r, i));
      s += x;
      abs_sum += std::fabs(x);
    }
    e.value = s;
    e.bound = (n - 1) * u * abs_sum;
    big = abs_sum;
  } else {
    long double m = -INFINITY;
    for (int r = 0; r < n; ++r) m = std::max(m, value_of(dt, input_bits(k, dt, r, i)));
    if (m == -INFINITY) {
      e.value = m;
      return e;
    }
    long double s = 0;
    for (int r = 0; r < n; ++r) {
      const long double x = value_of(dt, input_bits(k, dt, r, i));
      s += std::exp(x - m);
      if (std::isfinite(x)) big = std::max(big, std::fabs(x));
    }
    e.value = m + std::log(s);
    big = std::max(big, std::fabs(e.value));
    e.bound = (n - 1) * u * (big + 3);
  }
  e.bound += 0x1p-60L * (big + 1);  // the reference's own rounding
  if (mpt::is_lowp(dt)) e.bound += 0.5L * mpt::spacing(dt, static_cast<double>(std::fabs(e.value) + e.bound));
  return e;
}

// First element of got[0..count) (global indices first + i) that the reference refuses, or count.
size_t first_wrong(Kind k, weft_dtype_t dt, int n, const void* got, size_t first, size_t count, std::string* why) {
  for (size_t i = 0; i < count; ++i) {
    const Expect e = reference(k, dt, n, first + i);
    const uint64_t bits = mpt::load_bits(dt, got, i);
    bool ok;
    if (k == Kind::absmax || k == Kind::bitor_) {
      const int w = 8 * static_cast<int>(mpt::dtype_bytes(dt));
      const uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
      ok = (bits & mask) == (e.bits & mask);
    } else if (std::isinf(e.value)) {
      ok = value_of(dt, bits) == e.value;
    } else {
      ok = std::fabs(value_of(dt, bits) - e.value) <= e.bound;
    }
    if (!ok) {
      if (why) {
        *why = "element " + std::to_string(first + i) + " is " + mpt::format_value(dt, bits) + ", expected " +
               (k == Kind::absmax || k == Kind::bitor_ ? mpt::format_value(dt, e.bits)
                                                        : std::to_string(static_cast<double>(e.value)) + " +- " +
                                                              std::to_string(static_cast<double>(e.bound)));
      }
      return i;
    }
  }
  return count;
}

long g_injected = 0, g_caught = 0;

// Checks got against the reference; in injection mode also proves that the same check refuses a
// copy with one element corrupted (inject.h: the top exponent bit, or any bit of an integer).
void check(const std::string& what, Kind k, weft_dtype_t dt, const void* got, size_t first, size_t count) {
  std::string why;
  EXPECT_EQ(first_wrong(k, dt, g_world.size, got, first, count, &why), count) << what << ": " << why;
  if (!mpt::inject_enabled() || count == 0) return;
  const size_t w = mpt::dtype_bytes(dt), at = (count * 7 / 13) % count;
  std::vector<unsigned char> bad(static_cast<const unsigned char*>(got), static_cast<const unsigned char*>(got) + count * w);
  mpt::store_bits(dt, bad.data(), at, mpt::injected_bits(dt, mpt::load_bits(dt, bad.data(), at)));
  ++g_injected;
  if (first_wrong(k, dt, g_world.size, bad.data(), first, count, nullptr) < count) {
    ++g_caught;
  } else {
    ADD_FAILURE() << what << ": the injected corruption of element " << first + at << " was not caught";
  }
}

constexpr size_t kLarge = size_t{1} << 20;

std::vector<unsigned char> inputs(Kind k, weft_dtype_t dt, size_t count) {
  std::vector<unsigned char> buf(count * mpt::dtype_bytes(dt) + 1);
  for (size_t i = 0; i < count; ++i) mpt::store_bits(dt, buf.data(), i, input_bits(k, dt, g_world.rank, i));
  return buf;
}

// Blocking, or asynchronous through a request (read after the call has set it).
weft_status_t finish(weft_status_t s, const weft_request_t* req) {
  if (s != WEFT_OK || !*req) return s;
  s = weft_wait(*req);
  weft_request_free(*req);
  return s;
}

std::string label(const char* coll, Kind k, weft_dtype_t dt, size_t count, bool async) {
  return std::string(coll) + " " + kind_name(k) + " " + mpt::dtype_name(dt) + " count " + std::to_string(count) +
         (async ? " async" : "");
}

void run_allreduce(Kind k, weft_dtype_t dt, size_t count, bool async) {
  std::vector<unsigned char> send = inputs(k, dt, count), recv(send.size());
  weft_request_t req = nullptr;
  // The async form runs in place (sendbuf == recvbuf).
  void* out = async ? send.data() : recv.data();
  ASSERT_WEFT_OK(finish(weft_allreduce(send.data(), out, count, dt, ops().of(k), g_world.comm, nullptr,
                                       async ? &req : nullptr), &req));
  if (count < kLarge || g_world.size == 1) {
    check(label("allreduce", k, dt, count, async), k, dt, out, 0, count);
    return;
  }
  // Large: the reference costs n evaluations per element, so each rank checks its own 1/n of
  // the result (together: every element) and the first 1024 elements (every rank's copy).
  const size_t n = static_cast<size_t>(g_world.size), r = static_cast<size_t>(g_world.rank);
  const size_t lo = count * r / n, hi = count * (r + 1) / n, w = mpt::dtype_bytes(dt);
  check(label("allreduce", k, dt, count, async) + " (this rank's slice)", k, dt,
        static_cast<const unsigned char*>(out) + lo * w, lo, hi - lo);
  check(label("allreduce", k, dt, count, async) + " (first 1024)", k, dt, out, 0, 1024);
}

void run_reduce(Kind k, weft_dtype_t dt, size_t count, int root, bool async) {
  std::vector<unsigned char> send = inputs(k, dt, count), recv(send.size());
  weft_request_t req = nullptr;
  ASSERT_WEFT_OK(finish(weft_reduce(send.data(), recv.data(), count, dt, ops().of(k), root, g_world.comm, nullptr,
                                    async ? &req : nullptr), &req));
  if (g_world.rank == root) {
    check(label("reduce", k, dt, count, async) + " root " + std::to_string(root), k, dt, recv.data(), 0, count);
  }
}

void run_reduce_scatter(Kind k, weft_dtype_t dt, size_t recvcount, bool async) {
  const size_t n = static_cast<size_t>(g_world.size);
  std::vector<unsigned char> send = inputs(k, dt, recvcount * n), recv(recvcount * mpt::dtype_bytes(dt) + 1);
  weft_request_t req = nullptr;
  ASSERT_WEFT_OK(finish(weft_reduce_scatter(send.data(), recv.data(), recvcount, dt, ops().of(k), g_world.comm,
                                            nullptr, async ? &req : nullptr), &req));
  check(label("reduce_scatter", k, dt, recvcount, async), k, dt, recv.data(),
        recvcount * static_cast<size_t>(g_world.rank), recvcount);
}

const Kind kKinds[] = {Kind::absmax, Kind::logsumexp, Kind::sum, Kind::bitor_};

}  // namespace

TEST(PluginReduce, Allreduce) {
  for (Kind k : kKinds) {
    for (weft_dtype_t dt : dtypes_of(k)) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1023}}) run_allreduce(k, dt, count, false);
      // Large (chunked algorithms, widened in chunks): the first dtype and bfloat16 of each kind.
      if (dt == dtypes_of(k)[0] || dt == WEFT_BFLOAT16) run_allreduce(k, dt, kLarge, false);
    }
  }
}

TEST(PluginReduce, ReduceEveryRoot) {
  for (Kind k : kKinds) {
    for (weft_dtype_t dt : dtypes_of(k)) {
      for (int root = 0; root < g_world.size; ++root) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1023}}) run_reduce(k, dt, count, root, false);
      }
      // Large: the reduce-scatter + gather algorithm, at the last root (the first dtype only).
      if (dt == dtypes_of(k)[0]) run_reduce(k, dt, kLarge, g_world.size - 1, false);
    }
  }
}

TEST(PluginReduce, ReduceScatter) {
  for (Kind k : kKinds) {
    for (weft_dtype_t dt : dtypes_of(k)) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1023}}) run_reduce_scatter(k, dt, count, false);
      if (dt == dtypes_of(k)[0]) run_reduce_scatter(k, dt, kLarge / static_cast<size_t>(g_world.size), false);
    }
  }
}

TEST(PluginReduce, Async) {
  for (Kind k : kKinds) {
    const weft_dtype_t dt = dtypes_of(k)[0];
    run_allreduce(k, dt, 1023, true);
    run_reduce(k, dt, 1023, g_world.size / 2, true);
    run_reduce_scatter(k, dt, 513, true);
  }
}

// weft calls the operator once per chunk, never per element: a 1M-element allreduce makes far
// fewer calls than it has elements.
TEST(PluginReduce, CalledPerChunk) {
  const long before = g_or_calls.load();
  run_allreduce(Kind::bitor_, WEFT_INT32, kLarge, false);
  const long calls = g_or_calls.load() - before;
  EXPECT_LT(calls, 4096) << calls << " calls of the operator for " << kLarge << " elements";
  if (g_world.size > 1) {
    EXPECT_GT(calls, 0) << "the operator was never called";
  }
}

namespace {

void expect_error(const char* what, weft_status_t s, weft_status_t want, const std::vector<std::string>& words) {
  const std::string err = mpt::last_error();
  if (std::getenv("WEFT_TEST_VERBOSE")) mpt::logf("%s -> %s: %s", what, mpt::status_name(s), err.c_str());
  EXPECT_EQ(s, want) << what << ": returned " << mpt::status_name(s) << ": " << err;
  for (const std::string& w : words) EXPECT_TRUE(mpt::contains_ci(err, w)) << what << ": message lacks \"" << w << "\": " << err;
}

}  // namespace

TEST(PluginReduce, BadInput) {
  const Ops& o = ops();
  float f[8] = {0}, g[8] = {0};
  int32_t ia[8] = {0}, ib[8] = {0};
  uint8_t ua[8] = {0}, ub[8] = {0};
  weft_comm_t w = g_world.comm;
  // Unknown id: refused by every rank before any communication (no hang).
  expect_error("unknown op", weft_allreduce(f, g, 8, WEFT_FLOAT32, op_of_id(1000), w, nullptr, nullptr),
               WEFT_ERR_INVALID_ARGUMENT, {"1000", "reduction operator"});
  // A destroyed operator.
  weft_op_config_t c = WEFT_OP_CONFIG_INIT;
  const weft_dtype_t f32 = WEFT_FLOAT32;
  c.name = "short_lived";
  c.fn = failing_fn;
  c.dtypes = &f32;
  c.ndtypes = 1;
  weft_op_t dead;
  ASSERT_WEFT_OK(weft_op_create(&c, &dead));
  ASSERT_WEFT_OK(weft_op_destroy(dead));
  expect_error("destroyed op", weft_reduce(f, g, 8, WEFT_FLOAT32, dead, 0, w, nullptr, nullptr),
               WEFT_ERR_INVALID_ARGUMENT, {"destroyed"});
  expect_error("destroy twice", weft_op_destroy(dead), WEFT_ERR_INVALID_ARGUMENT, {"destroyed"});
  // Dtypes the operator does not take: the message names the operator, the dtype and what it takes.
  expect_error("absmax uint8", weft_allreduce(ua, ub, 8, WEFT_UINT8, o.absmax, w, nullptr, nullptr),
               WEFT_ERR_INVALID_ARGUMENT, {"absmax", "uint8", "float64, float32, int32, int64"});
  expect_error("logsumexp int32", weft_reduce_scatter(ia, ib, 1, WEFT_INT32, o.logsumexp, w, nullptr, nullptr),
               WEFT_ERR_INVALID_ARGUMENT, {"logsumexp", "int32", "float32"});
  expect_error("bitor float32", weft_reduce(f, g, 8, WEFT_FLOAT32, o.bitor_, 0, w, nullptr, nullptr),
               WEFT_ERR_INVALID_ARGUMENT, {"bitor", "float32", "uint8, int32, int64"});
  // Destroy refuses built-in and plugin operators.
  expect_error("destroy WEFT_SUM", weft_op_destroy(WEFT_SUM), WEFT_ERR_INVALID_ARGUMENT, {"built-in"});
  expect_error("destroy absmax", weft_op_destroy(o.absmax), WEFT_ERR_INVALID_ARGUMENT, {"absmax", "plugin"});
  // weft_op_create's config.
  weft_op_t out;
  weft_op_config_t bad = c;
  bad.name = nullptr;
  expect_error("NULL name", weft_op_create(&bad, &out), WEFT_ERR_INVALID_ARGUMENT, {"name"});
  bad = c;
  bad.fn = nullptr;
  expect_error("NULL fn", weft_op_create(&bad, &out), WEFT_ERR_INVALID_ARGUMENT, {"fn"});
  bad = c;
  bad.ndtypes = 0;
  expect_error("no dtypes", weft_op_create(&bad, &out), WEFT_ERR_INVALID_ARGUMENT, {"dtypes"});
  const weft_dtype_t half = WEFT_FLOAT16;
  bad.dtypes = &half;
  bad.ndtypes = 1;
  expect_error("float16 listed", weft_op_create(&bad, &out), WEFT_ERR_INVALID_ARGUMENT, {"float16", "WEFT_FLOAT32"});
  bad = c;
  bad.struct_size = 8;
  expect_error("struct_size", weft_op_create(&bad, &out), WEFT_ERR_INVALID_ARGUMENT, {"struct_size"});
  // The communicator still works.
  run_allreduce(Kind::absmax, WEFT_FLOAT32, 7, false);
}

// Under WEFT_DEBUG=check, ranks that pass different operators fail together with a message that
// shows both operators by name.
TEST(PluginReduce, MismatchNamesOperators) {
  const char* debug = std::getenv("WEFT_DEBUG");
  if (!debug || !std::strstr(debug, "check") || g_world.size == 1) GTEST_SKIP() << "needs WEFT_DEBUG=check and 2+ ranks";
  const Ops& o = ops();
  float a[4] = {1, 2, 3, 4}, b[4];
  const weft_op_t mine = g_world.rank == 0 ? o.absmax : o.logsumexp;
  expect_error("mismatched operators", weft_allreduce(a, b, 4, WEFT_FLOAT32, mine, g_world.comm, nullptr, nullptr),
               WEFT_ERR_MISMATCH, {"'absmax'", "'logsumexp'"});
  run_allreduce(Kind::logsumexp, WEFT_FLOAT32, 5, false);  // the communicator still works
}

// An operator that returns an error fails the collective with the operator's name, on a
// duplicate of the world communicator (a failure mid-collective leaves it unusable). Ranks that
// never call the operator in the algorithm chosen may instead see their peers' failure.
TEST(PluginReduce, FailingOperator) {
  weft_comm_t dup = nullptr;
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &dup));
  weft_op_config_t c = WEFT_OP_CONFIG_INIT;
  const weft_dtype_t f32 = WEFT_FLOAT32;
  c.name = "always_fails";
  c.fn = failing_fn;
  c.dtypes = &f32;
  c.ndtypes = 1;
  weft_op_t op;
  ASSERT_WEFT_OK(weft_op_create(&c, &op));
  std::vector<float> a(4096 * static_cast<size_t>(g_world.size), 1.0f);
  const weft_status_t s = weft_allreduce(a.data(), a.data(), a.size(), WEFT_FLOAT32, op, dup, nullptr, nullptr);
  const std::string err = mpt::last_error();
  if (g_world.size == 1) {
    EXPECT_EQ(s, WEFT_OK) << "one rank reduces nothing, so the operator is never called: " << err;
  } else {
    EXPECT_NE(s, WEFT_OK) << "an operator that fails did not fail the allreduce";
    if (s == WEFT_ERR_INVALID_ARGUMENT) {
      EXPECT_TRUE(mpt::contains_ci(err, "always_fails")) << "message does not name the operator: " << err;
    }
    mpt::logf("failing operator: %s: %s", mpt::status_name(s), err.c_str());
  }
  weft_comm_destroy(dup);
  weft_op_destroy(op);
}

TEST(PluginReduce, InjectionReport) {
  if (!mpt::inject_enabled()) return;
  mpt::logf("injected %ld, caught %ld", g_injected, g_caught);
  EXPECT_GT(g_injected, 0) << "injection mode corrupted nothing";
  EXPECT_EQ(g_caught, g_injected) << "some injected corruption was not caught";
}
