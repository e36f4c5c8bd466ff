#include "core/plugin/env.h"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "core/common/status.h"
#include "core/plugin/loader.h"

namespace weft::plugin {

namespace {

// The error of the first path that failed; plugins before it stay loaded (a library is never
// unloaded), those after it are not tried.
std::optional<Error> load_all() {
  const char* list = std::getenv("WEFT_PLUGINS");
  if (!list) return std::nullopt;
  const std::string s(list);
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    const std::string path = s.substr(start, end - start);
    if (!path.empty()) {
      try {
        load_plugin(path);
      } catch (const Error& e) {
        return Error(e.status(), "WEFT_PLUGINS: " + e.message());
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace

void load_env_plugins() {
  static std::once_flag once;
  static std::optional<Error> error;
  // call_once with a function that does not throw: a throwing one would be retried by the
  // next caller, loading the paths before the failing one twice over.
  std::call_once(once, [] { error = load_all(); });
  if (error) throw *error;
}

}  // namespace weft::plugin
