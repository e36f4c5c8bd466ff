// The case matrix of weft_mp_collectives: which collective, dtype, op, size, algorithm and
// mode combinations run, in CI (default) and in the full product (WEFT_TEST_FULL=1 / --full).
//
// CI coverage (per rank count; the ctest entries run n = 1, 2, 3, 4, 5, 7, 8):
//   part "small"    every collective x every dtype x every op (reducing collectives) at sizes
//                   0, 1, 7 and 1000 with exact inputs, plus (float dtypes of reducing
//                   collectives) "special" inputs at size 7 (NaN, inf, fp8 saturation, f16/bf16
//                   overflow) and "random" inputs at size 1000 (tolerance). The variant (algorithm,
//                   in-place, async, root) rotates with the case, so every dtype of a collective
//                   meets every variant when there are <= 20 (allreduce: 16) and every variant is
//                   met by some dtype.
//   part "variants" every collective x every variant (algorithm x in-place x blocking/async x
//                   root first/last) at sizes 0, 1, 7, 1000 in f32 (sum for reducing ones) and at
//                   size 7 in i64 max; barrier in both modes.
//   part "large"    kLargeTable below: per algorithm, a few dtype/op pairs at 1000003 elements
//                   and 16 MiB.
//   part "barrier"  barrier semantics: nobody leaves before the last rank arrives.
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
