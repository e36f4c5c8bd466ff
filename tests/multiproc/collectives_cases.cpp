#include "collectives_cases.h"

#include <algorithm>
#include <cstdio>

#include "reference.h"

namespace mpt {
namespace {

const std::vector<CollInfo>& table() {
  static const std::vector<CollInfo> t = {
      {Coll::allreduce, "allreduce", "WEFT_ALGO_ALLREDUCE",
       {"auto", "auto-noshm", "recursive_doubling", "ring", "rabenseifner", "shm"}, true, false, true, false},
      {Coll::broadcast, "broadcast", "WEFT_ALGO_BROADCAST",
       {"auto", "auto-noshm", "binomial", "scatter_allgather", "shm"}, false, true, false, false},
      {Coll::reduce, "reduce", "WEFT_ALGO_REDUCE",
       {"auto", "auto-noshm", "binomial", "reduce_scatter_gather", "shm"}, true, true, true, false},
      {Coll::allgather, "allgather", "WEFT_ALGO_ALLGATHER", {"auto", "auto-noshm", "ring", "bruck", "shm"}, false,
       false, true, true},
      {Coll::allgatherv, "allgatherv", nullptr, {"ring"}, false, false, true, true},
      {Coll::reduce_scatter, "reduce_scatter", "WEFT_ALGO_REDUCE_SCATTER", {"auto", "ring", "shm"}, true, false, true,
       true},
      {Coll::alltoall, "alltoall", "WEFT_ALGO_ALLTOALL", {"auto", "pairwise", "shm"}, false, false, true, true},
      {Coll::alltoallv, "alltoallv", nullptr, {"pairwise"}, false, false, true, true},
      {Coll::gather, "gather", nullptr, {"linear"}, false, true, true, true},
      {Coll::scatter, "scatter", nullptr, {"linear"}, false, true, true, true},
      {Coll::sendrecv, "sendrecv", nullptr, {"p2p"}, false, false, false, false},
      {Coll::barrier, "barrier", "WEFT_ALGO_BARRIER", {"auto", "dissemination", "shm"}, false, false, false, false},
  };
  return t;
}

bool in_list(const std::vector<std::string>& l, const std::string& v) {
  return l.empty() || std::find(l.begin(), l.end(), v) != l.end();
}

const weft_dtype_t kDtypes[] = {WEFT_FLOAT64, WEFT_FLOAT32, WEFT_FLOAT16, WEFT_BFLOAT16,
                                WEFT_FP8_E4M3, WEFT_FP8_E5M2, WEFT_INT8, WEFT_UINT8,
                                WEFT_INT32, WEFT_UINT32, WEFT_INT64, WEFT_UINT64};
const size_t kSmallSizes[] = {0, 1, 7, 1000};

std::vector<int> ops_of(const CollInfo& ci) { return mpt::ops_of(ci.coll); }

Input default_input(const CollInfo& ci) { return ci.reducing ? Input::exact : Input::raw; }

Case make(Coll coll, weft_dtype_t dt, int op, size_t size, const Variant& v, Input in, const char* part) {
  Case c;
  c.coll = coll;
  c.dt = dt;
  c.op = op;
  c.size = size;
  c.algo = v.algo;
  c.inplace = v.inplace;
  c.async = v.async;
  c.rootsel = v.rootsel;
  c.input = in;
  c.part = part;
  return c;
}

// ------------------------------------------------------------------ the large-size subset
// One row per case; every algorithm of every collective appears ("auto" is the shared-memory
// path on one host, "auto-noshm" the size-based point-to-point choice), which
// collectives_coverage.cpp checks. Variants alternate so both in-place and async paths see
// large buffers.
struct LargeRow {
  Coll coll;
  const char* algo;
  weft_dtype_t dt;
  int op;
  size_t size;
  Input input;
  bool inplace, async;
  int rootsel;
};
const LargeRow kLargeTable[] = {
    // allreduce: f32 sum, i64 max, bf16 sum and u8 prod on every algorithm
    {Coll::allreduce, "auto", WEFT_FLOAT32, WEFT_SUM, kSize16MiB, Input::exact, false, false, 0},
    {Coll::allreduce, "recursive_doubling", WEFT_FLOAT32, WEFT_SUM, kSize16MiB, Input::exact, true, false, 0},
    {Coll::allreduce, "ring", WEFT_FLOAT32, WEFT_SUM, kSize16MiB, Input::random, false, true, 0},
    {Coll::allreduce, "rabenseifner", WEFT_FLOAT32, WEFT_SUM, kSize16MiB, Input::exact, true, true, 0},
    {Coll::allreduce, "auto", WEFT_INT64, WEFT_MAX, kSizeOdd, Input::exact, true, false, 0},
    {Coll::allreduce, "recursive_doubling", WEFT_INT64, WEFT_MAX, kSizeOdd, Input::exact, false, true, 0},
    {Coll::allreduce, "ring", WEFT_INT64, WEFT_MAX, kSizeOdd, Input::exact, true, false, 0},
    {Coll::allreduce, "rabenseifner", WEFT_INT64, WEFT_MAX, kSizeOdd, Input::exact, false, false, 0},
    {Coll::allreduce, "recursive_doubling", WEFT_BFLOAT16, WEFT_SUM, kSizeOdd, Input::exact, false, false, 0},
    {Coll::allreduce, "ring", WEFT_BFLOAT16, WEFT_SUM, kSizeOdd, Input::random, false, false, 0},
    {Coll::allreduce, "rabenseifner", WEFT_BFLOAT16, WEFT_SUM, kSizeOdd, Input::random, true, true, 0},
    {Coll::allreduce, "recursive_doubling", WEFT_UINT8, WEFT_PROD, kSizeOdd, Input::exact, true, true, 0},
    {Coll::allreduce, "ring", WEFT_UINT8, WEFT_PROD, kSize16MiB, Input::exact, false, false, 0},
    {Coll::allreduce, "rabenseifner", WEFT_UINT8, WEFT_PROD, kSizeOdd, Input::exact, false, true, 0},
    {Coll::allreduce, "auto-noshm", WEFT_FLOAT32, WEFT_SUM, kSize16MiB, Input::exact, false, false, 0},
    {Coll::allreduce, "auto-noshm", WEFT_BFLOAT16, WEFT_SUM, kSizeOdd, Input::random, true, false, 0},
    {Coll::allreduce, "shm", WEFT_UINT8, WEFT_PROD, kSizeOdd, Input::exact, true, true, 0},
    {Coll::allreduce, "auto", WEFT_UINT8, WEFT_PROD, kSizeOdd, Input::exact, false, false, 0},
    {Coll::allreduce, "auto-noshm", WEFT_UINT8, WEFT_PROD, kSizeOdd, Input::exact, false, true, 0},
    {Coll::allreduce, "shm", WEFT_FLOAT32, WEFT_SUM, kSizeOdd, Input::random, false, false, 0},
    {Coll::allreduce, "auto-noshm", WEFT_INT64, WEFT_MAX, kSizeOdd, Input::exact, true, true, 0},
    {Coll::allreduce, "shm", WEFT_INT64, WEFT_MAX, kSizeOdd, Input::exact, false, true, 0},
    {Coll::allreduce, "auto", WEFT_BFLOAT16, WEFT_SUM, kSizeOdd, Input::random, false, true, 0},
    {Coll::allreduce, "shm", WEFT_BFLOAT16, WEFT_SUM, kSizeOdd, Input::exact, true, false, 0},
    // broadcast
    {Coll::broadcast, "auto", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, false, 0},
    {Coll::broadcast, "binomial", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, true, 1},
    {Coll::broadcast, "scatter_allgather", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, false, false, 1},
    {Coll::broadcast, "scatter_allgather", WEFT_UINT8, kNoOp, kSize16MiB, Input::raw, false, true, 0},
    {Coll::broadcast, "auto-noshm", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, false, 1},
    {Coll::broadcast, "shm", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, false, true, 1},
    // reduce
    {Coll::reduce, "auto", WEFT_FLOAT64, WEFT_SUM, kSizeOdd, Input::exact, false, false, 1},
    {Coll::reduce, "binomial", WEFT_FLOAT64, WEFT_SUM, kSize16MiB, Input::random, true, false, 0},
    {Coll::reduce, "reduce_scatter_gather", WEFT_FLOAT64, WEFT_SUM, kSize16MiB, Input::exact, false, true, 1},
    {Coll::reduce, "reduce_scatter_gather", WEFT_FP8_E4M3, WEFT_SUM, kSizeOdd, Input::special, true, false, 0},
    {Coll::reduce, "auto-noshm", WEFT_FLOAT64, WEFT_SUM, kSize16MiB, Input::exact, false, false, 1},
    {Coll::reduce, "shm", WEFT_FP8_E4M3, WEFT_SUM, kSizeOdd, Input::special, false, true, 1},
    // allgather
    {Coll::allgather, "auto", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, false, 0},
    {Coll::allgather, "ring", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, true, true, 0},
    {Coll::allgather, "bruck", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, false, 0},
    {Coll::allgather, "bruck", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, true, false, 0},
    {Coll::allgather, "auto-noshm", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, true, 0},
    {Coll::allgather, "shm", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, true, false, 0},
    // single-algorithm collectives
    {Coll::allgatherv, "ring", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, false, true, 0},
    {Coll::allgatherv, "ring", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, true, false, 0},
    {Coll::reduce_scatter, "auto", WEFT_FLOAT64, WEFT_SUM, kSize16MiB, Input::exact, false, false, 0},
    {Coll::reduce_scatter, "ring", WEFT_FLOAT64, WEFT_SUM, kSize16MiB, Input::exact, true, false, 0},
    {Coll::reduce_scatter, "ring", WEFT_FLOAT16, WEFT_SUM, kSizeOdd, Input::random, true, true, 0},
    {Coll::reduce_scatter, "shm", WEFT_FLOAT16, WEFT_SUM, kSizeOdd, Input::random, false, false, 0},
    {Coll::alltoall, "auto", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, false, 0},
    {Coll::alltoall, "pairwise", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, true, 0},
    {Coll::alltoall, "pairwise", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, true, true, 0},
    {Coll::alltoall, "shm", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, false, true, 0},
    {Coll::alltoallv, "pairwise", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, false, true, 0},
    {Coll::alltoallv, "pairwise", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, true, false, 0},
    {Coll::gather, "linear", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, false, 1},
    {Coll::gather, "linear", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, true, true, 0},
    {Coll::scatter, "linear", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, true, 0},
    {Coll::scatter, "linear", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, true, false, 1},
    {Coll::sendrecv, "p2p", WEFT_FLOAT64, kNoOp, kSize16MiB, Input::raw, false, false, 0},
    {Coll::sendrecv, "p2p", WEFT_FLOAT64, kNoOp, kSizeOdd, Input::raw, false, true, 0},
};

}  // namespace

const std::vector<CollInfo>& all_colls() { return table(); }
const std::vector<weft_dtype_t>& all_dtypes() {
  static const std::vector<weft_dtype_t> v(std::begin(kDtypes), std::end(kDtypes));
  return v;
}
const std::vector<size_t>& small_sizes() {
  static const std::vector<size_t> v(std::begin(kSmallSizes), std::end(kSmallSizes));
  return v;
}
std::vector<int> ops_of(Coll c) {
  if (!coll_info(c).reducing) return {kNoOp};
  return {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG};
}
const CollInfo& coll_info(Coll c) { return table()[static_cast<size_t>(c)]; }

std::string Case::size_label() const {
  if (size == kSize16MiB) return "16MiB";
  return std::to_string(size);
}

std::string Case::key() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s/%s/%s/%s/%s/ip%d/as%d/r%d/%s", coll_info(coll).name, dtype_name(dt),
                op == kNoOp ? "-" : op_name(static_cast<weft_op_t>(op)), size_label().c_str(), algo.c_str(),
                inplace, async, rootsel, input_name(input));
  return buf;
}

uint64_t Case::seed() const { return hash_str(key().c_str()); }

size_t Case::count(int nranks) const {
  const size_t total = size == kSize16MiB ? (size_t{16} << 20) / dtype_bytes(dt) : size;
  const CollInfo& ci = coll_info(coll);
  if (ci.blocked && size >= kSizeOdd) return std::max<size_t>(1, total / static_cast<size_t>(nranks));
  return total;
}

std::string Case::describe(int nranks) const {
  const CollInfo& ci = coll_info(coll);
  char buf[400];
  std::snprintf(buf, sizeof buf, "%s dtype=%s op=%s count=%zu (size %s) algo=%s mode=%s,%s root=%s input=%s part=%s",
                ci.name, coll == Coll::barrier ? "-" : dtype_name(dt),
                op == kNoOp ? "-" : op_name(static_cast<weft_op_t>(op)), count(nranks), size_label().c_str(),
                algo.c_str(), inplace ? "inplace" : "outofplace", async ? "async" : "blocking",
                ci.rooted ? std::to_string(root(nranks)).c_str() : "-", input_name(input), part);
  return buf;
}

std::string Case::repro(int nranks) const {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "build/bin/weftrun -n %d build/bin/weft_mp_collectives --full --coll=%s --dtype=%s --op=%s "
                "--size=%s --algo=%s --inplace=%d --async=%d --root=%s --input=%s",
                nranks, coll_info(coll).name, dtype_name(dt), op == kNoOp ? "-" : op_name(static_cast<weft_op_t>(op)),
                size_label().c_str(), algo.c_str(), inplace, async, rootsel ? "last" : "first", input_name(input));
  return buf;
}

std::vector<Variant> variants_of(Coll c, int nranks) {
  const CollInfo& ci = coll_info(c);
  std::vector<Variant> out;
  for (const char* a : ci.algos)
    for (int ip = 0; ip < (ci.has_inplace ? 2 : 1); ++ip)
      for (int as = 0; as < 2; ++as)
        for (int rs = 0; rs < (ci.rooted && nranks > 1 ? 2 : 1); ++rs) out.push_back({a, ip != 0, as != 0, rs});
  return out;
}

bool Filter::matches(const Case& c) const {
  if (!in_list(colls, coll_info(c.coll).name)) return false;
  if (!in_list(dtypes, dtype_name(c.dt))) return false;
  if (!in_list(ops, c.op == kNoOp ? "-" : op_name(static_cast<weft_op_t>(c.op)))) return false;
  if (!in_list(sizes, c.size_label())) return false;
  if (!in_list(algos, c.algo)) return false;
  if (!in_list(inputs, input_name(c.input))) return false;
  if (!in_list(parts, c.part)) return false;
  if (inplace >= 0 && c.inplace != (inplace != 0)) return false;
  if (async >= 0 && c.async != (async != 0)) return false;
  if (rootsel >= 0 && coll_info(c.coll).rooted && c.rootsel != rootsel) return false;
  return true;
}

std::vector<Case> build_cases(int nranks, const Filter& f) {
  std::vector<Case> cases;
  auto add = [&](const Case& c) {
    if (f.matches(c)) cases.push_back(c);
  };
  if (f.full) {
    // The whole product: every collective x dtype x op x size x variant x input kind.
    const size_t sizes[] = {0, 1, 7, 1000, kSizeOdd, kSize16MiB};
    for (const CollInfo& ci : all_colls()) {
      for (weft_dtype_t dt : kDtypes) {
        if (ci.coll == Coll::barrier && dt != WEFT_FLOAT32) continue;
        if (ci.coll == Coll::sendrecv && nranks == 1) continue;
        for (int op : ops_of(ci)) {
          std::vector<Input> ins = {default_input(ci)};
          if (ci.reducing && is_float(dt)) ins = {Input::exact, Input::random, Input::special};
          for (Input in : ins)
            for (size_t s : sizes) {
              if (ci.coll == Coll::barrier && s != 0) continue;
              for (const Variant& v : variants_of(ci.coll, nranks)) add(make(ci.coll, dt, op, s, v, in, "full"));
            }
        }
      }
    }
    return cases;
  }

  // Part "small": a covering design rather than the product. Per collective and dtype, case k
  // takes content (op, size) number k % (ops x sizes) and variant (k + d) % |variants|, for
  // k < max(|variants|, ops x sizes): every (dtype, op, size) and every (dtype, variant) is met,
  // and the per-dtype shift d spreads each op over the variants too.
  for (const CollInfo& ci : all_colls()) {
    if (ci.coll == Coll::barrier) continue;
    if (ci.coll == Coll::sendrecv && nranks == 1) continue;  // no peer (main reports the skip)
    const std::vector<Variant> vs = variants_of(ci.coll, nranks);
    const std::vector<int> ops = ops_of(ci);
    const size_t contents = ops.size() * std::size(kSmallSizes);
    const size_t per_dtype = std::max(vs.size(), contents);
    for (size_t d = 0; d < std::size(kDtypes); ++d) {
      for (size_t k = 0; k < per_dtype; ++k) {
        const int op = ops[(k % contents) % ops.size()];
        const size_t size = kSmallSizes[(k % contents) / ops.size()];
        add(make(ci.coll, kDtypes[d], op, size, vs[(k + d) % vs.size()], default_input(ci), "small"));
      }
    }
    // Special (size 7) and random (size 1000) inputs of the float dtypes: case j takes (float
    // dtype, op) pair j % pairs and variant j % |variants|, so every pair and every variant
    // meets both input kinds.
    if (!ci.reducing) continue;
    std::vector<weft_dtype_t> floats;
    for (weft_dtype_t dt : kDtypes)
      if (is_float(dt)) floats.push_back(dt);
    const size_t pairs = floats.size() * ops.size();
    for (Input in : {Input::special, Input::random}) {
      const size_t size = in == Input::special ? 7 : 1000;
      for (size_t j = 0; j < std::max(vs.size(), pairs); ++j) {
        const size_t p = j % pairs;
        add(make(ci.coll, floats[p / ops.size()], ops[p % ops.size()], size, vs[j % vs.size()], in, "small"));
      }
    }
  }

  // Part "variants": every variant of every collective at the small sizes.
  for (const CollInfo& ci : all_colls()) {
    if (ci.coll == Coll::sendrecv && nranks == 1) continue;
    for (const Variant& v : variants_of(ci.coll, nranks)) {
      if (ci.coll == Coll::barrier) {
        add(make(ci.coll, WEFT_FLOAT32, kNoOp, 0, v, Input::raw, "variants"));
        continue;
      }
      const int op = ci.reducing ? WEFT_SUM : kNoOp;
      for (size_t s : kSmallSizes) add(make(ci.coll, WEFT_FLOAT32, op, s, v, default_input(ci), "variants"));
      add(make(ci.coll, WEFT_INT64, ci.reducing ? WEFT_MAX : kNoOp, 7, v, default_input(ci), "variants"));
    }
  }

  // Part "large": the table above.
  for (const LargeRow& r : kLargeTable) {
    if (r.coll == Coll::sendrecv && nranks == 1) continue;
    Variant v{r.algo, r.inplace, r.async, nranks > 1 ? r.rootsel : 0};
    add(make(r.coll, r.dt, r.op, r.size, v, r.input, "large"));
  }
  return cases;
}

}  // namespace mpt
