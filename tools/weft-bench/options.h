// weft-bench's command line: nccl-tests' flags, plus the collective name and --csv.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <weft/weft.h>

namespace weftbench {

// The redist_* "collectives" are weft_redistribute calls on a 1-d mesh over all ranks
// (redistribution.h): S(0) -> R, P(op) -> S(0) and S(0) -> S(1) of a 2-d tensor.
enum class Coll {
  allreduce,
  allgather,
  reduce_scatter,
  alltoall,
  broadcast,
  reduce,
  sendrecv,
  redist_s2r,
  redist_p2s,
  redist_s0s1
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::vector<Coll> collectives{Coll::allreduce};
  size_t min_bytes = size_t{32} << 20;
  size_t max_bytes = size_t{32} << 20;
  size_t step_bytes = 0;     // -i: additive step; 0 = use step_factor
  double step_factor = 2.0;  // -f
  std::vector<weft_dtype_t> dtypes{WEFT_FLOAT32};
  std::vector<weft_op_t> ops{WEFT_SUM};
  int root = 0;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  bool blocking = true;       // -z 1: one blocking call per iteration; -z 0: issue all, then wait
  std::string csv_path;       // --csv FILE: machine-readable rows (rank 0 writes)
  std::string library = "weft";  // the "library" column of --csv
  bool help = false;
};

// Throws UsageError with a one-line reason.
Options parse_options(int argc, const char* const* argv);
// "8", "64K", "1M", "2G" (binary multiples, as nccl-tests); throws UsageError.
size_t parse_size(const std::string& s);
const char* usage_text();

const char* coll_name(Coll c);
const char* op_name(weft_op_t op);

}  // namespace weftbench
