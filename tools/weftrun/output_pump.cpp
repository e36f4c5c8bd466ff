#include "tools/weftrun/output_pump.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weftrun {

void Sink::write_all(const char* data, size_t len) {
  while (!broken_ && len > 0) {
    ssize_t n = ::write(fd_, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      broken_ = true;  // EPIPE and friends: stop writing, keep draining the ranks
      return;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

void LinePump::emit(const char* data, size_t len, bool add_newline) {
  // One write per line: lines from our two sinks and from other processes sharing the
  // terminal stay whole (writes to a pipe up to PIPE_BUF are atomic).
  scratch_.assign(prefix_);
  scratch_.append(data, len);
  if (add_newline) scratch_.push_back('\n');
  sink_.write_all(scratch_.data(), scratch_.size());
}

void LinePump::feed(const char* data, size_t len) {
  const char* end = data + len;
  while (data < end) {
    const char* nl = static_cast<const char*>(std::memchr(data, '\n', end - data));
    if (!nl) {
      partial_.append(data, end - data);
      break;
    }
    if (partial_.empty()) {
      emit(data, nl + 1 - data, false);
    } else {
      partial_.append(data, nl + 1 - data);
      emit(partial_.data(), partial_.size(), false);
      partial_.clear();
    }
    data = nl + 1;
  }
  // Bound memory for a rank writing a huge line (or binary data) without newlines.
  while (partial_.size() >= kMaxLine) {
    emit(partial_.data(), kMaxLine, !prefix_.empty());
    partial_.erase(0, kMaxLine);
  }
}

void LinePump::finish() {
  if (!partial_.empty()) emit(partial_.data(), partial_.size(), !prefix_.empty());
  partial_.clear();
}

}  // namespace weftrun
