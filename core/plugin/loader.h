// Loading a plugin (weft_plugin_load): dlopen, the manifest (core/plugin/manifest.h), every
// entry's symbol checked to be a function of the library, a libffi call interface per entry, and
// then, all or nothing, the kinds' registration in core/plugin/registry.h. A loaded library is
// never unloaded (weft/plugin.h "Lifetime"), so a LoadedPlugin lives until the process exits.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/plugin/ffi_call.h"
#include "core/plugin/manifest.h"

namespace weft::plugin {

struct LoadedEntry {
  Entry entry;
  void (*fn)() = nullptr;  // the symbol's address
  int id = -1;             // the registered extension's id; -1 for FUNCTION
  std::unique_ptr<CallInterface> call;
};

struct LoadedPlugin {
  std::string path;  // as given to the first successful load
  void* handle = nullptr;
  std::string name;
  std::string version;
  int abi_major = 0;
  int abi_minor = 0;
  std::vector<LoadedEntry> entries;
  std::unordered_map<std::string_view, size_t> by_name;  // views into entries' names

  const LoadedEntry* find(std::string_view name) const;
  // find(), or Error(INVALID_ARGUMENT) "plugin 'p' has no entry 'x'; its entries: a, b, c".
  const LoadedEntry& get(std::string_view name) const;
};

// Loads path (once per library: a second load of the same file returns the same plugin and
// registers nothing). Throws Error naming path and, where there is one, the entry; nothing is
// registered then. Thread-safe.
const LoadedPlugin& load_plugin(const std::string& path);

// weft_plugin_call: calls a loaded entry with args (see core/plugin/ffi_call.h).
void call_entry(const LoadedEntry& entry, const Value* args, size_t nargs, Value* result);

}  // namespace weft::plugin
