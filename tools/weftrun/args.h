// weftrun's command line: what the user asked for, checked before anything is started.
#pragma once

#include <string>
#include <vector>

namespace weftrun {

constexpr int kMaxRanks = 1024;  // one host's worth; more is surely a typo

struct Options {
  int nranks = 0;
  double timeout_s = 0;  // 0 = no limit
  bool prefix = true;    // "[rank] " before every output line
  bool help = false;     // -h/--help: print usage on stdout and exit 0
  std::vector<std::string> program;  // program and its arguments
};

// Thrown for bad usage; main prints the message and the usage text, exits 2.
struct UsageError {
  std::string message;
};

// Parses argv[1..argc). Options end at "--" or at the first argument that is not an option,
// so the program's own options (even ones named like ours) pass through untouched.
Options parse_args(int argc, const char* const* argv);

const char* usage_text();

}  // namespace weftrun
