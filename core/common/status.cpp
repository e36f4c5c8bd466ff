#include "core/common/status.h"

#include <cstdio>
#include <vector>

namespace weft {

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "WEFT_OK";
    case Status::invalid_argument: return "WEFT_ERR_INVALID_ARGUMENT";
    case Status::unsupported: return "WEFT_ERR_UNSUPPORTED";
    case Status::out_of_memory: return "WEFT_ERR_OUT_OF_MEMORY";
    case Status::timeout: return "WEFT_ERR_TIMEOUT";
    case Status::remote: return "WEFT_ERR_REMOTE";
    case Status::aborted: return "WEFT_ERR_ABORTED";
    case Status::mismatch: return "WEFT_ERR_MISMATCH";
    case Status::transport: return "WEFT_ERR_TRANSPORT";
    case Status::internal: return "WEFT_ERR_INTERNAL";
    case Status::in_progress: return "WEFT_IN_PROGRESS";
  }
  return "WEFT_STATUS_UNKNOWN";
}

std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return std::string();
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

void fail(Status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  throw Error(status, std::move(s));
}

}  // namespace weft
