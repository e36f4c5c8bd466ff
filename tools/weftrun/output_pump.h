// Turns one rank stream (its stdout or its stderr) into whole lines on weftrun's own stream,
// each tagged "[rank] ", so lines of different ranks never interleave mid-line.
#pragma once

#include <cstddef>
#include <string>

namespace weftrun {

// Where lines go. A failed write (say, weftrun's stdout is a closed pipe) turns the sink off;
// the ranks keep running and their output is drained and dropped, so they never block on us.
class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}
  void write_all(const char* data, size_t len);

 private:
  int fd_;
  bool broken_ = false;
};

class LinePump {
 public:
  // prefix: "" for --no-prefix, else "[rank] ".
  LinePump(Sink& sink, std::string prefix) : sink_(sink), prefix_(std::move(prefix)) {}

  // Feeds bytes read from the rank; writes every line completed so far.
  void feed(const char* data, size_t len);
  // The rank's stream hit EOF: writes a partial last line (with a newline added when
  // prefixing, so the next rank's line starts on its own line).
  void finish();

  // A line longer than this is written in pieces rather than buffered without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

 private:
  void emit(const char* data, size_t len, bool add_newline);

  Sink& sink_;
  std::string prefix_;
  std::string partial_;  // bytes after the last newline seen
  std::string scratch_;  // reused to assemble prefix + line in one write
};

}  // namespace weftrun
