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
  std::string plugin_path;              // --plugin PATH: loaded before anything runs
  std::vector<std::string> plugin_ops;  // -o names that are not built in: the plugin's REDUCE_OP entries
  std::vector<size_t> plugin_op_at;     // where each goes in ops (the -o list's order)
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
// A built-in op's name, or a plugin operator's entry name once load_plugin_ops resolved it.
const char* op_name(weft_op_t op);
bool is_plugin_op(weft_op_t op);  // WEFT_PLUGIN_ID_BASE and up
// Loads opt.plugin_path (weft_plugin_load) and inserts each of opt.plugin_ops, looked up as a
// REDUCE_OP entry, into opt.ops at its place in the -o list. Throws UsageError naming what is wrong.
void load_plugin_ops(Options& opt);

}  // namespace weftbench
