// The structs behind weft_plugin_t and weft_closure_t (weft/plugin.h) and their registries.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/plugin/closure.h"
#include "core/plugin/loader.h"
#include "weft/plugin.h"

struct weft_plugin {
  uint64_t magic;
  const weft::plugin::LoadedPlugin* loaded;  // lives until the process exits
  std::string path;                          // as given to this weft_plugin_load
  // Per entry, the C-typed arrays weft_plugin_entry_t points into (valid while the handle lives).
  std::vector<std::vector<weft_value_type_t>> args;
  std::vector<std::vector<weft_dtype_t>> dtypes;
};

struct weft_closure {
  uint64_t magic;
  std::unique_ptr<weft::plugin::Closure> closure;
};

namespace weft::capi {

constexpr uint64_t kPluginMagic = 0x6e6967756c506677ull;   // "wfPlugin"
constexpr uint64_t kClosureMagic = 0x657275736f6c4366ull;  // "fClosure"

weft_plugin_t register_plugin(std::unique_ptr<weft_plugin> p);
weft_plugin* lookup_plugin(weft_plugin_t h, const char* arg);
void unregister_plugin(weft_plugin_t h);

weft_closure_t register_closure(std::unique_ptr<weft_closure> c);
weft_closure* lookup_closure(weft_closure_t h, const char* arg);
void unregister_closure(weft_closure_t h);

// core's Value and the ABI's weft_value_t (the same layout: static_asserts in plugin_handles.cpp).
plugin::Value to_core(const weft_value_t& v);
weft_value_t to_abi(const plugin::Value& v);

}  // namespace weft::capi
