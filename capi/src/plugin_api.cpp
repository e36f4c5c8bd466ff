// weft_plugin_*: the C shims of loading, inspecting and calling plugins (weft/plugin.h). The work
// is in core/plugin (loader, manifest, ffi_call); a handle adds the C-typed arrays the entry
// structs point into.
#include <cstring>
#include <new>

#include "capi/src/plugin_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"

using namespace weft;
using namespace weft::capi;

namespace {

weft_plugin_entry_t describe(const weft_plugin& h, size_t index) {
  const plugin::LoadedEntry& le = h.loaded->entries[index];
  weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
  e.name = le.entry.name.c_str();
  e.kind = static_cast<weft_plugin_kind_t>(le.entry.kind);
  e.symbol = le.entry.symbol.c_str();
  e.doc = le.entry.doc.c_str();
  e.ret = static_cast<weft_value_type_t>(le.entry.signature.ret);
  e.args = h.args[index].data();
  e.nargs = h.args[index].size();
  e.dtypes = h.dtypes[index].empty() ? nullptr : h.dtypes[index].data();
  e.ndtypes = h.dtypes[index].size();
  e.id = le.id;
  return e;
}

void write_entry(const weft_plugin& h, size_t index, weft_plugin_entry_t* entry) {
  const weft_plugin_entry_t e = describe(h, index);
  std::memcpy(static_cast<void*>(entry), &e, entry->struct_size);
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_plugin_load(const char* path, weft_plugin_t* plugin) {
  return guarded(__func__, [&] {
    check_out(plugin, "plugin");
    *plugin = nullptr;
    if (!path) fail(Status::invalid_argument, "path is NULL; expected a plugin's shared library");
    const plugin::LoadedPlugin& loaded = plugin::load_plugin(path);
    auto h = std::make_unique<weft_plugin>();
    h->loaded = &loaded;
    h->path = path;
    for (const plugin::LoadedEntry& le : loaded.entries) {
      std::vector<weft_value_type_t> args;
      for (plugin::ValueType t : le.entry.signature.args) args.push_back(static_cast<weft_value_type_t>(t));
      std::vector<weft_dtype_t> dtypes;
      for (int d : le.entry.dtypes) dtypes.push_back(static_cast<weft_dtype_t>(d));
      h->args.push_back(std::move(args));
      h->dtypes.push_back(std::move(dtypes));
    }
    *plugin = register_plugin(std::move(h));
  });
}

WEFT_API weft_status_t weft_plugin_destroy(weft_plugin_t plugin) {
  return guarded(__func__, [&] {
    if (!plugin) return;
    lookup_plugin(plugin, "plugin");
    unregister_plugin(plugin);
  });
}

WEFT_API weft_status_t weft_plugin_info(weft_plugin_t plugin, weft_plugin_info_t* info) {
  return guarded(__func__, [&] {
    const weft_plugin& h = *lookup_plugin(plugin, "plugin");
    check_out(info, "info");
    check_struct_size(info, "info", "WEFT_PLUGIN_INFO_INIT");
    weft_plugin_info_t out = WEFT_PLUGIN_INFO_INIT;
    out.name = h.loaded->name.c_str();
    out.version = h.loaded->version.c_str();
    out.path = h.path.c_str();
    out.abi_major = h.loaded->abi_major;
    out.abi_minor = h.loaded->abi_minor;
    out.nentries = h.loaded->entries.size();
    std::memcpy(static_cast<void*>(info), &out, info->struct_size);
  });
}

WEFT_API weft_status_t weft_plugin_entry(weft_plugin_t plugin, size_t index, weft_plugin_entry_t* entry) {
  return guarded(__func__, [&] {
    const weft_plugin& h = *lookup_plugin(plugin, "plugin");
    check_out(entry, "entry");
    check_struct_size(entry, "entry", "WEFT_PLUGIN_ENTRY_INIT");
    if (index >= h.loaded->entries.size()) {
      fail(Status::invalid_argument, "index = %zu; plugin '%s' has %zu entries", index, h.loaded->name.c_str(),
           h.loaded->entries.size());
    }
    write_entry(h, index, entry);
  });
}

WEFT_API weft_status_t weft_plugin_lookup(weft_plugin_t plugin, const char* name, weft_plugin_entry_t* entry) {
  return guarded(__func__, [&] {
    const weft_plugin& h = *lookup_plugin(plugin, "plugin");
    if (!name) fail(Status::invalid_argument, "name is NULL; expected an entry name");
    check_out(entry, "entry");
    check_struct_size(entry, "entry", "WEFT_PLUGIN_ENTRY_INIT");
    const plugin::LoadedEntry& le = h.loaded->get(name);
    write_entry(h, static_cast<size_t>(&le - h.loaded->entries.data()), entry);
  });
}

WEFT_API weft_status_t weft_plugin_call(weft_plugin_t plugin, const char* entry, const weft_value_t* args,
                                        size_t nargs, weft_value_t* result) {
  return guarded(__func__, [&] {
    const weft_plugin& h = *lookup_plugin(plugin, "plugin");
    if (!entry) fail(Status::invalid_argument, "entry is NULL; expected an entry name");
    const plugin::LoadedEntry& le = h.loaded->get(entry);
    const plugin::Signature& sig = le.entry.signature;
    if (nargs != sig.args.size()) {
      fail(Status::invalid_argument, "'%s' takes %zu arguments (%s); got nargs = %zu", entry, sig.args.size(),
           plugin::signature_string(sig, le.entry.name).c_str(), nargs);
    }
    if (nargs > 0 && !args) fail(Status::invalid_argument, "args is NULL; '%s' takes %zu arguments", entry, nargs);
    // Storage for nargs values only: a default-initialised Value[kMaxArgs] would zero 1 KiB per
    // call, a noticeable part of the call's cost (bench/plugin_call_bench.c).
    alignas(plugin::Value) unsigned char storage[sizeof(plugin::Value) * plugin::kMaxArgs];
    auto* in = reinterpret_cast<plugin::Value*>(storage);
    for (size_t i = 0; i < nargs; ++i) new (&in[i]) plugin::Value(to_core(args[i]));
    plugin::Value out;
    plugin::call_entry(le, in, nargs, result ? &out : nullptr);
    if (result) *result = to_abi(out);
  });
}

}  // extern "C"
