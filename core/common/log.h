// Logging controlled by WEFT_DEBUG (a comma list: "info", "check", "trace"), like NCCL_DEBUG.
// Lines go to stderr as "weft <host>:<pid> [<name>:<rank>] message".
#pragma once

#include <string>

namespace weft {

enum class LogLevel { warn = 0, info = 1, trace = 2 };

bool log_enabled(LogLevel level);
// WEFT_DEBUG contains "check": collectives compare op/dtype/count/root across ranks first.
// Read at each call (communicator creation); the log levels are read once.
bool debug_check_from_env();
void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace weft
