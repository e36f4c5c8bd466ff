// Status codes and the exception type that carries them through core/.
// The numeric values equal weft_status_t's (capi/ static_asserts this), so the C shims convert
// by cast; core/ never includes capi/.
#pragma once

#include <cstdarg>
#include <exception>
#include <string>

namespace weft {

enum class Status : int {
  ok = 0,
  invalid_argument = 1,
  unsupported = 2,
  out_of_memory = 3,
  timeout = 4,
  remote = 5,
  aborted = 6,
  mismatch = 7,
  transport = 8,
  internal = 9,
  in_progress = 10,
};

const char* status_name(Status s);

// Thrown anywhere in core/; the C shims turn it into a status code and weft_last_error() text.
class Error : public std::exception {
 public:
  Error(Status status, std::string message) : status_(status), message_(std::move(message)) {}
  Status status() const noexcept { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }

 private:
  Status status_;
  std::string message_;
};

// printf-style message formatting for error texts and logs.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vformat(const char* fmt, va_list ap);

[[noreturn]] void fail(Status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace weft
