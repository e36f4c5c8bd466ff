// write_timeline: one of the timeline pictures (timeline_svg.cpp, timeline_chrome.cpp) into a
// file. The text is made first, so a drawing error leaves no half-written file behind.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/common/status.h"
#include "core/pipeline/timeline.h"

namespace weft::pipeline {

void write_timeline(const Timeline& t, TimelineFormat format, const std::string& path) {
  std::string text;
  switch (format) {
    case TimelineFormat::svg:
      text = timeline_svg(t);
      break;
    case TimelineFormat::chrome_trace:
      text = timeline_chrome_trace(t);
      break;
    default:
      fail(Status::invalid_argument, "timeline format %d is neither SVG (0) nor Chrome trace (1)",
           static_cast<int>(format));
  }
  if (path.empty()) fail(Status::invalid_argument, "timeline path is empty");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(Status::invalid_argument, "cannot open %s for writing: %s", path.c_str(), std::strerror(errno));
  const size_t written = std::fwrite(text.data(), 1, text.size(), f);
  const int write_errno = errno;
  if (written != text.size()) {
    std::fclose(f);
    fail(Status::invalid_argument, "cannot write %s: %s", path.c_str(), std::strerror(write_errno));
  }
  if (std::fclose(f) != 0) fail(Status::invalid_argument, "cannot write %s: %s", path.c_str(), std::strerror(errno));
}

}  // namespace weft::pipeline
