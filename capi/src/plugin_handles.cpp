#include "capi/src/plugin_handles.h"

#include <cstddef>
#include <cstring>

#include "capi/src/registry.h"
#include "capi/src/shim.h"
#include "core/plugin/registry.h"

namespace weft::capi {

static_assert(WEFT_PLUGIN_ABI_MAJOR == plugin::kAbiMajor && WEFT_PLUGIN_ABI_MINOR == plugin::kAbiMinor,
              "weft/plugin.h and core/plugin/manifest.h disagree on the plugin ABI");
static_assert(WEFT_PLUGIN_ID_BASE == plugin::kIdBase, "extension id base");
static_assert(static_cast<int>(WEFT_TYPE_FN) == static_cast<int>(plugin::ValueType::fn) &&
                  static_cast<int>(WEFT_TYPE_NUM) == plugin::kNumValueTypes,
              "value type numbers");
static_assert(static_cast<int>(WEFT_PLUGIN_COST_MODEL) == static_cast<int>(plugin::Kind::cost_model) &&
                  static_cast<int>(WEFT_PLUGIN_NUM_KINDS) == plugin::kNumKinds,
              "kind numbers");
static_assert(sizeof(weft_value_t) == sizeof(plugin::Value) && offsetof(weft_value_t, i) == offsetof(plugin::Value, i) &&
                  offsetof(weft_value_t, f) == offsetof(plugin::Value, f) &&
                  offsetof(weft_value_t, p) == offsetof(plugin::Value, p) &&
                  sizeof(weft_value_type_t) == sizeof(plugin::ValueType),
              "weft_value_t and core's Value have one layout");

namespace {

auto& plugins() {
  static auto* r = new Registry<weft_plugin, kPluginMagic>("a plugin from weft_plugin_load", "a live plugin handle",
                                                           "destroyed");
  return *r;
}
auto& closures() {
  static auto* r = new Registry<weft_closure, kClosureMagic>("a closure from weft_closure_create", "a live closure",
                                                             "destroyed");
  return *r;
}

}  // namespace

weft_plugin_t register_plugin(std::unique_ptr<weft_plugin> p) { return plugins().add(std::move(p)); }
weft_plugin* lookup_plugin(weft_plugin_t h, const char* arg) { return plugins().find(h, arg); }
void unregister_plugin(weft_plugin_t h) { plugins().remove(h); }

weft_closure_t register_closure(std::unique_ptr<weft_closure> c) { return closures().add(std::move(c)); }
weft_closure* lookup_closure(weft_closure_t h, const char* arg) { return closures().find(h, arg); }
void unregister_closure(weft_closure_t h) { closures().remove(h); }

plugin::Value to_core(const weft_value_t& v) {
  plugin::Value out;
  // The type is read by its bytes: a caller may put any int there (shim.h enum_bits).
  out.type = static_cast<plugin::ValueType>(enum_bits(v.type));
  out.i = v.i;
  out.f = v.f;
  out.p = v.p;
  return out;
}

weft_value_t to_abi(const plugin::Value& v) {
  weft_value_t out = WEFT_VALUE_INIT;
  const int t = static_cast<int>(v.type);
  std::memcpy(&out.type, &t, sizeof t);
  out.i = v.i;
  out.f = v.f;
  out.p = v.p;
  return out;
}

}  // namespace weft::capi
