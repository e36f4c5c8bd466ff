// Command-line parsing for weftrun. Hand-rolled rather than getopt: getopt permutes argv on
// glibc and would steal the program's own options; here everything after the program name is
// the program's.
#include "tools/weftrun/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace weftrun {

namespace {

int parse_nranks(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0)
    throw UsageError{"-n expects a whole number of ranks, got '" + s + "'"};
  if (v < 1 || v > kMaxRanks)
    throw UsageError{"-n must be between 1 and " + std::to_string(kMaxRanks) + ", got " + s};
  return static_cast<int>(v);
}

double parse_timeout(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0)
    throw UsageError{"--timeout expects a positive number of seconds, got '" + s + "'"};
  return v;
}

}  // namespace

Options parse_args(int argc, const char* const* argv) {
  Options opt;
  bool have_n = false;
  int i = 1;
  // The value of an option given either as "--opt value" or "--opt=value".
  auto value_of = [&](const std::string& arg, const std::string& name) -> std::string {
    if (arg.size() > name.size()) return arg.substr(name.size() + 1);  // "--opt=value"
    if (i + 1 >= argc) throw UsageError{name + " needs a value"};
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the program starts here
    if (arg == "-h" || arg == "--help") {
      opt.help = true;
      return opt;
    } else if (arg == "-n" || arg == "--nproc" || arg.rfind("--nproc=", 0) == 0) {
      opt.nranks = parse_nranks(arg == "-n" ? value_of(arg, "-n") : value_of(arg, "--nproc"));
      have_n = true;
    } else if (arg.rfind("-n", 0) == 0 && arg.size() > 2 && arg[2] != '-') {
      opt.nranks = parse_nranks(arg.substr(2));  // "-n4"
      have_n = true;
    } else if (arg == "--timeout" || arg.rfind("--timeout=", 0) == 0) {
      opt.timeout_s = parse_timeout(value_of(arg, "--timeout"));
    } else if (arg == "--no-prefix") {
      opt.prefix = false;
    } else {
      throw UsageError{"unknown option '" + arg + "'"};
    }
  }
  for (; i < argc; ++i) opt.program.emplace_back(argv[i]);
  if (!have_n) throw UsageError{"missing -n N (the number of ranks)"};
  if (opt.program.empty()) throw UsageError{"no program given"};
  return opt;
}

const char* usage_text() {
  return "usage: weftrun -n N [--timeout S] [--no-prefix] [--] program [args...]\n"
         "\n"
         "Starts N local ranks of program, hosting their rendezvous store.\n"
         "\n"
         "  -n N, --nproc N  number of ranks, 1..1024\n"
         "  --timeout S      kill all ranks after S seconds (fractions allowed); exit 124\n"
         "  --no-prefix      pass rank output through without the \"[rank] \" prefix\n"
         "  -h, --help       print this text\n"
         "\n"
         "Each rank gets WEFT_RANK, WEFT_WORLD_SIZE, WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE,\n"
         "WEFT_MASTER_ADDR, WEFT_MASTER_PORT, WEFT_JOB_SECRET, WEFT_STORE_HOSTED=1 and\n"
         "torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.\n"
         "MASTER_PORT is a second free port, for torch.distributed's own store (its rank 0\n"
         "binds it); weft programs find weftrun's store through WEFT_MASTER_PORT.\n"
         "Rank stdin is /dev/null.\n"
         "\n"
         "Exit status: 0 when every rank exits 0; else the first failing rank's status\n"
         "(128+signal for a signal); 124 on --timeout; 127 when program cannot be found,\n"
         "126 when it cannot be executed; 2 for bad usage. SIGINT/SIGTERM/SIGHUP are forwarded\n"
         "to the ranks (exit 128+signal).\n";
}

}  // namespace weftrun
