#include "core/common/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/common/status.h"

namespace weft {
namespace {

struct DebugFlags {
  bool info = false;
  bool trace = false;
  bool check = false;
};

DebugFlags parse_flags() {
  DebugFlags f;
  const char* env = std::getenv("WEFT_DEBUG");
  if (!env) return f;
  std::string s(env);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string word = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (word == "info" || word == "INFO") f.info = true;
    if (word == "trace" || word == "TRACE") f.info = f.trace = true;
    if (word == "check" || word == "CHECK") f.check = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return f;
}

const DebugFlags& flags() {
  static const DebugFlags f = parse_flags();
  return f;
}

}  // namespace

bool log_enabled(LogLevel level) {
  switch (level) {
    case LogLevel::warn: return true;
    case LogLevel::info: return flags().info;
    case LogLevel::trace: return flags().trace;
  }
  return false;
}

// Read afresh: communicators take it when they are created, like WEFT_ALGO_*.
bool debug_check_from_env() { return parse_flags().check; }

void log(LogLevel level, const char* fmt, ...) {
  if (!log_enabled(level)) return;
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  const char* tag = level == LogLevel::warn ? "WARN" : (level == LogLevel::info ? "INFO" : "TRACE");
  // One fprintf per line keeps lines from different threads whole.
  std::fprintf(stderr, "weft %s:%d %s %s\n", host, static_cast<int>(getpid()), tag, msg.c_str());
}

}  // namespace weft
