#include "options.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "dtypes.h"

namespace weftbench {

namespace {

struct CollName {
  const char* name;
  Coll coll;
};
// First spelling is the canonical one; the others are nccl-tests' binary names and aliases.
const CollName kCollNames[] = {
    {"allreduce", Coll::allreduce},         {"all_reduce", Coll::allreduce},
    {"allgather", Coll::allgather},         {"all_gather", Coll::allgather},
    {"reduce_scatter", Coll::reduce_scatter}, {"reducescatter", Coll::reduce_scatter},
    {"alltoall", Coll::alltoall},           {"all_to_all", Coll::alltoall},
    {"broadcast", Coll::broadcast},
    {"bcast", Coll::broadcast},             {"reduce", Coll::reduce},
    {"sendrecv", Coll::sendrecv},
    {"redist_s2r", Coll::redist_s2r},       {"redist_p2s", Coll::redist_p2s},
    {"redist_s0s1", Coll::redist_s0s1},
};
// "all": the plain collectives; "redist": the three redistributions.
const Coll kAllColls[] = {Coll::allreduce, Coll::allgather, Coll::reduce_scatter, Coll::alltoall,
                          Coll::broadcast, Coll::reduce,    Coll::sendrecv};
const Coll kRedistColls[] = {Coll::redist_s2r, Coll::redist_p2s, Coll::redist_s0s1};

struct OpName {
  const char* name;
  weft_op_t op;
};
const OpName kOpNames[] = {
    {"sum", WEFT_SUM}, {"prod", WEFT_PROD}, {"min", WEFT_MIN}, {"max", WEFT_MAX}, {"avg", WEFT_AVG}};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

long parse_int(const std::string& flag, const std::string& s, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
    throw UsageError(flag + " expects a whole number in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + s + "'");
  return v;
}

std::vector<Coll> parse_collectives(const std::string& s) {
  std::vector<Coll> out;
  for (const std::string& name : split_list(s)) {
    if (name == "all") {
      out.insert(out.end(), std::begin(kAllColls), std::end(kAllColls));
      continue;
    }
    if (name == "redist") {
      out.insert(out.end(), std::begin(kRedistColls), std::end(kRedistColls));
      continue;
    }
    bool found = false;
    for (const CollName& c : kCollNames)
      if (name == c.name) {
        out.push_back(c.coll);
        found = true;
        break;
      }
    if (!found)
      throw UsageError("unknown collective '" + name +
                       "' (allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce, "
                       "sendrecv, all, redist_s2r, redist_p2s, redist_s0s1, redist)");
  }
  if (out.empty()) throw UsageError("no collective given");
  return out;
}

std::vector<weft_dtype_t> parse_dtypes(const std::string& s) {
  std::vector<weft_dtype_t> out;
  for (const std::string& name : split_list(s)) {
    if (name == "all") {
      for (const DtypeInfo& t : all_dtypes()) out.push_back(t.dtype);
      continue;
    }
    const DtypeInfo* t = find_dtype(name);
    if (!t)
      throw UsageError("unknown datatype '" + name +
                       "' (float, double, half, bfloat16, fp8e4m3, fp8e5m2, int8, uint8, int32, "
                       "uint32, int64, uint64, all)");
    out.push_back(t->dtype);
  }
  if (out.empty()) throw UsageError("no datatype given");
  return out;
}

// Names that are not built in are kept, with their places in the list, for load_plugin_ops
// (they need --plugin).
std::vector<weft_op_t> parse_ops(const std::string& s, std::vector<std::string>* plugin_ops,
                                 std::vector<size_t>* plugin_op_at) {
  std::vector<weft_op_t> out;
  plugin_ops->clear();
  plugin_op_at->clear();
  for (const std::string& name : split_list(s)) {
    if (name == "all") {
      for (const OpName& o : kOpNames) out.push_back(o.op);
      continue;
    }
    bool found = false;
    for (const OpName& o : kOpNames)
      if (name == o.name) {
        out.push_back(o.op);
        found = true;
      }
    if (!found) {
      plugin_op_at->push_back(out.size() + plugin_ops->size());
      plugin_ops->push_back(name);
    }
  }
  if (out.empty() && plugin_ops->empty()) throw UsageError("no op given");
  return out;
}

}  // namespace

const char* coll_name(Coll c) {
  for (const CollName& n : kCollNames)
    if (n.coll == c) return n.name;
  return "?";
}

namespace {
// The plugin operators load_plugin_ops resolved, for op_name (a few entries per run).
std::vector<std::pair<int, std::string>>& plugin_op_names() {
  static std::vector<std::pair<int, std::string>> names;
  return names;
}
// Plugin ids lie past weft_op_t's enumerators: read and written by their bits.
int op_bits(weft_op_t op) {
  int v;
  std::memcpy(&v, &op, sizeof v);
  return v;
}
}  // namespace

const char* op_name(weft_op_t op) {
  for (const OpName& o : kOpNames)
    if (o.op == op) return o.name;
  for (const auto& [id, name] : plugin_op_names())
    if (id == op_bits(op)) return name.c_str();
  return "?";
}

bool is_plugin_op(weft_op_t op) { return op_bits(op) >= WEFT_PLUGIN_ID_BASE; }

void load_plugin_ops(Options& opt) {
  if (opt.plugin_path.empty()) return;
  weft_plugin_t plugin = nullptr;
  if (weft_plugin_load(opt.plugin_path.c_str(), &plugin) != WEFT_OK)
    throw UsageError(std::string("--plugin: ") + weft_last_error());
  for (size_t k = 0; k < opt.plugin_ops.size(); ++k) {
    const std::string& name = opt.plugin_ops[k];
    weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
    if (weft_plugin_lookup(plugin, name.c_str(), &e) != WEFT_OK)
      throw UsageError("-o " + name + ": " + weft_last_error());
    if (e.kind != WEFT_PLUGIN_REDUCE_OP)
      throw UsageError("-o " + name + ": entry '" + name + "' of " + opt.plugin_path + " is not a reduction operator");
    weft_op_t op;
    std::memcpy(&op, &e.id, sizeof op);
    plugin_op_names().emplace_back(e.id, name);
    opt.ops.insert(opt.ops.begin() + static_cast<std::ptrdiff_t>(opt.plugin_op_at[k]), op);  // -o's order
  }
  weft_plugin_destroy(plugin);  // the operators stay registered
}

size_t parse_size(const std::string& s) {
  size_t pos = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  if (pos == 0) throw UsageError("bad size '" + s + "' (expected e.g. 8, 64K, 1M, 2G)");
  errno = 0;
  unsigned long long v = std::strtoull(s.substr(0, pos).c_str(), nullptr, 10);
  if (errno != 0) throw UsageError("size '" + s + "' is too large");
  std::string suffix = s.substr(pos);
  for (char& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  unsigned long long mult = 1;
  if (suffix.empty() || suffix == "B") {
    mult = 1;
  } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
    mult = 1ull << 10;
  } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
    mult = 1ull << 20;
  } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
    mult = 1ull << 30;
  } else {
    throw UsageError("bad size suffix in '" + s + "' (K, M or G)");
  }
  if (v > std::numeric_limits<unsigned long long>::max() / mult)
    throw UsageError("size '" + s + "' is too large");
  return static_cast<size_t>(v * mult);
}

const char* usage_text() {
  return "usage: weftrun -n N weft-bench [options]\n"
         "       weftrun -n N weft-bench moe [moe options]   (weft-bench moe --help)\n"
         "       weftrun -n N weft-bench --cluster-file PATH  (weft-plan's cluster file; --cluster-file --help)\n"
         "\n"
         "nccl-tests-style benchmark of weft's collectives on host memory; the moe mode times\n"
         "expert-parallel dispatch and combine (weft/moe.h).\n"
         "\n"
         "  -c, --collective LIST  allreduce, allgather, reduce_scatter, alltoall, broadcast,\n"
         "                         reduce, sendrecv, or all; comma-separated (default allreduce).\n"
         "                         redist_s2r, redist_p2s, redist_s0s1 (or redist: the three):\n"
         "                         weft_redistribute on a 1-d mesh of all ranks, 2-d tensor,\n"
         "                         S(0)->R, P(op)->S(0), S(0)->S(1); sized and busbw as\n"
         "                         allgather, reduce_scatter and alltoall respectively.\n"
         "                         -c 0 / -c 1 is nccl-tests' check flag (see --check)\n"
         "  -b, --minbytes SIZE    smallest message size, e.g. 8, 64K, 1M (default 32M)\n"
         "  -e, --maxbytes SIZE    largest message size (default 32M)\n"
         "  -i, --stepbytes SIZE   additive step between sizes (default: use -f)\n"
         "  -f, --stepfactor F     multiplicative step between sizes (default 2)\n"
         "  -d, --datatype LIST    float, double, half, bfloat16, fp8e4m3, fp8e5m2, int8, uint8,\n"
         "                         int32, uint32, int64, uint64, or all (default float)\n"
         "  -o, --op LIST          sum, prod, min, max, avg, or all (default sum), and names of\n"
         "                         --plugin's reduction operators (REDUCE_OP entries)\n"
         "      --plugin PATH      load a weft plugin (weft/plugin.h) first; its results are not\n"
         "                         checked (#wrong N/A): weft-bench has no reference for them\n"
         "  -r, --root R           root rank of broadcast and reduce (default 0)\n"
         "  -n, --iters N          timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N   untimed iterations before timing (default 5)\n"
         "      --check 0|1        check results against a reference, print #wrong (default 1)\n"
         "  -z, --blocking 0|1     1: blocking calls; 0: issue all iterations asynchronously,\n"
         "                         then wait for them (default 1)\n"
         "      --csv FILE         also write rank 0's out-of-place rows as CSV:\n"
         "                         library,collective,nranks,bytes,count,dtype,time_us,algbw,busbw,wrong\n"
         "      --library NAME     value of the csv's library column (default weft)\n"
         "  -h, --help             this text\n"
         "\n"
         "Sizes follow nccl-tests: the whole message (allgather, reduce_scatter and alltoall: all\n"
         "ranks' blocks together). time is the largest per-rank average over the timed iterations;\n"
         "algbw = size / time; busbw = algbw * (allreduce 2(n-1)/n; allgather, reduce_scatter,\n"
         "alltoall and the redist_* (n-1)/n; broadcast, reduce, sendrecv 1). Exit status 1 when\n"
         "any result is wrong.\n";
}

Options parse_options(int argc, const char* const* argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        has_inline = true;
      }
    }
    auto next = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      opt.help = true;
    } else if (arg == "-c" || arg == "--collective") {
      std::string v = next();
      if (arg == "-c" && (v == "0" || v == "1"))
        opt.check = v == "1";  // nccl-tests' -c (check)
      else
        opt.collectives = parse_collectives(v);
    } else if (arg == "--check") {
      opt.check = parse_int(arg, next(), 0, 1) == 1;
    } else if (arg == "-b" || arg == "--minbytes") {
      opt.min_bytes = parse_size(next());
    } else if (arg == "-e" || arg == "--maxbytes") {
      opt.max_bytes = parse_size(next());
    } else if (arg == "-i" || arg == "--stepbytes") {
      opt.step_bytes = parse_size(next());
      if (opt.step_bytes == 0) throw UsageError("-i must be positive");
    } else if (arg == "-f" || arg == "--stepfactor") {
      std::string v = next();
      char* end = nullptr;
      double f = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(f) || f <= 1.0)
        throw UsageError("-f expects a factor > 1, got '" + v + "'");
      opt.step_factor = f;
      opt.step_bytes = 0;
    } else if (arg == "-d" || arg == "--datatype") {
      opt.dtypes = parse_dtypes(next());
    } else if (arg == "-o" || arg == "--op") {
      opt.ops = parse_ops(next(), &opt.plugin_ops, &opt.plugin_op_at);
    } else if (arg == "--plugin") {
      opt.plugin_path = next();
      if (opt.plugin_path.empty()) throw UsageError("--plugin needs a path");
    } else if (arg == "-r" || arg == "--root") {
      opt.root = static_cast<int>(parse_int(arg, next(), 0, 1 << 20));
    } else if (arg == "-n" || arg == "--iters") {
      opt.iters = static_cast<int>(parse_int(arg, next(), 1, 1 << 30));
    } else if (arg == "-w" || arg == "--warmup_iters") {
      opt.warmup = static_cast<int>(parse_int(arg, next(), 0, 1 << 30));
    } else if (arg == "-z" || arg == "--blocking") {
      opt.blocking = parse_int(arg, next(), 0, 1) == 1;
    } else if (arg == "--csv") {
      opt.csv_path = next();
      if (opt.csv_path.empty()) throw UsageError("--csv needs a file name");
    } else if (arg == "--library") {
      opt.library = next();
    } else {
      throw UsageError("unknown option '" + arg + "'");
    }
  }
  if (opt.min_bytes > opt.max_bytes) throw UsageError("-b is larger than -e");
  if (!opt.plugin_ops.empty() && opt.plugin_path.empty())
    throw UsageError("unknown op '" + opt.plugin_ops[0] + "' (sum, prod, min, max, avg, all, or a reduction "
                     "operator of --plugin PATH)");
  return opt;
}

}  // namespace weftbench
