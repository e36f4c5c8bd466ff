// The case matrix of weft_mp_collectives: which collective, dtype, op, size, algorithm and
// mode combinations run, in CI (default) and in the full product (WEFT_TEST_FULL=1 / --full).
//
// CI coverage per rank count (ctest runs every part at n = 1-8). collectives_coverage.cpp
// checks each sentence below against this case list for n = 1-8 (ctest mp_collectives_coverage):
//   part "small"    a covering design: every collective x every dtype x every op (reducing
//                   collectives) x sizes 0, 1, 7, 1000 with exact (reducing) or raw inputs;
//                   every (collective, dtype) and every (collective, op) meets every variant
//                   (algorithm, in-place, async, root); every (reducing collective, float dtype,
//                   op) also with "special" inputs at size 7 (NaN, inf, overflow, fp8 saturation,
//                   signed zeros) and "random" inputs at size 1000 (tolerance), and every variant
//                   of a reducing collective meets both. sendrecv needs 2 ranks.
//   part "variants" every collective x every variant at sizes 0, 1, 7, 1000 in f32 (sum for
//                   reducing ones) and at size 7 in i64 (max); barrier in both modes.
//   part "large"    kLargeTable: every algorithm of every collective at 1000003 elements or
//                   16 MiB; allreduce with f32 sum, i64 max, bf16 sum and u8 prod on every
//                   algorithm; every collective in-place (where it has one) and async.
//   part "barrier"  barrier semantics: nobody leaves before the last rank arrives (n >= 2).
// Algorithms: every name WEFT_ALGO_<COLLECTIVE> accepts, each on its own communicator made by
// weft_comm_dup with the variable set (it is read at creation). "auto" resolves to the
// shared-memory collectives when all ranks share a host (always, under weftrun);
// "auto-noshm" is auto with WEFT_SHM=0, i.e. the size-based point-to-point choice.
// Sizes are element counts of the `count` argument (per block for the block collectives:
// allgather sendcount, reduce_scatter recvcount, alltoall/gather/scatter count, base count of
// allgatherv/alltoallv). The large sizes are per-rank totals: for block collectives the block
// is max(1, total / nranks), so memory stays bounded with 8 ranks on a small machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "inputs.h"
#include "weft/weft.h"

namespace mpt {

enum class Coll {
  allreduce, broadcast, reduce, allgather, allgatherv, reduce_scatter,
  alltoall, alltoallv, gather, scatter, sendrecv, barrier,
};
constexpr int kNumColls = 12;

struct CollInfo {
  Coll coll;
  const char* name;
  const char* algo_env;             // WEFT_ALGO_* variable, or nullptr (single algorithm)
  std::vector<const char*> algos;   // "auto" first when algo_env is set
  bool reducing;
  bool rooted;
  bool has_inplace;
  bool blocked;                     // count is per rank block
};
const CollInfo& coll_info(Coll c);
const std::vector<CollInfo>& all_colls();
const std::vector<weft_dtype_t>& all_dtypes();  // all 12, floats first
const std::vector<size_t>& small_sizes();       // 0, 1, 7, 1000
std::vector<int> ops_of(Coll c);                // the 5 ops, or {kNoOp} for non-reducing ones

constexpr size_t kSize16MiB = static_cast<size_t>(-1);  // marker: 16 MiB worth of elements
constexpr size_t kSizeOdd = 1000003;
constexpr int kNoOp = -1;

struct Case {
  Coll coll = Coll::allreduce;
  weft_dtype_t dt = WEFT_FLOAT32;
  int op = kNoOp;              // weft_op_t, or kNoOp for non-reducing collectives
  size_t size = 0;             // nominal size (elements, or kSize16MiB)
  std::string algo;            // one of coll_info(coll).algos
  bool inplace = false;
  bool async = false;
  int rootsel = 0;             // 0: root 0, 1: root nranks-1
  Input input = Input::raw;
  const char* part = "";

  std::string size_label() const;
  std::string key() const;     // unique text; also the seed
  uint64_t seed() const;
  int root(int nranks) const { return rootsel ? nranks - 1 : 0; }
  // The `count` passed to the collective (per block for blocked collectives).
  size_t count(int nranks) const;
  // Description for failure messages and the command line that repeats only this case.
  std::string describe(int nranks) const;
  std::string repro(int nranks) const;
};

struct Variant {
  std::string algo;
  bool inplace;
  bool async;
  int rootsel;
};
std::vector<Variant> variants_of(Coll c, int nranks);

// Filters from the command line (all ranks must pass the same ones).
struct Filter {
  std::vector<std::string> colls, dtypes, ops, sizes, algos, inputs, parts;
  int inplace = -1, async = -1, rootsel = -1;
  bool full = false;
  bool matches(const Case& c) const;
};

std::vector<Case> build_cases(int nranks, const Filter& f);

}  // namespace mpt
