#include "core/plugin/loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>
#include <map>
#include <mutex>

#include "core/common/status.h"
#include "core/plugin/registry.h"

namespace weft::plugin {

const LoadedEntry* LoadedPlugin::find(std::string_view name) const {
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : &entries[it->second];
}

const LoadedEntry& LoadedPlugin::get(std::string_view name) const {
  if (const LoadedEntry* e = find(name)) return *e;
  std::string list;
  for (const LoadedEntry& e : entries) list += (list.empty() ? "" : ", ") + e.entry.name;
  fail(Status::invalid_argument, "plugin '%s' (%s) has no entry '%.*s'; its entries: %s", this->name.c_str(),
       path.c_str(), static_cast<int>(name.size()), name.data(), list.empty() ? "none" : list.c_str());
}

namespace {

std::mutex& load_mutex() {
  static std::mutex m;
  return m;
}

// Loaded plugins by dlopen handle (the same file opened twice gives the same handle). Never
// freed: libraries are never unloaded, and LoadedPlugin references are handed out for good.
std::map<void*, LoadedPlugin*>& loaded() {
  static auto* m = new std::map<void*, LoadedPlugin*>;
  return *m;
}

const char* elf_type_name(unsigned t) {
  switch (t) {
    case STT_NOTYPE: return "NOTYPE (no type)";
    case STT_OBJECT: return "OBJECT (a data object)";
    case STT_FUNC: return "FUNC";
    case STT_SECTION: return "SECTION";
    case STT_FILE: return "FILE";
    case STT_COMMON: return "COMMON (a data object)";
    case STT_TLS: return "TLS (thread-local data)";
    case STT_GNU_IFUNC: return "GNU_IFUNC";
  }
  return "unknown";
}

// The address of entry e's symbol after checking that the library itself defines it and that
// it is a function: dlsym alone would also find data, and symbols of the library's dependencies.
void (*resolve(void* handle, const link_map* self, const Entry& e, size_t index))() {
  dlerror();
  void* addr = dlsym(handle, e.symbol.c_str());
  const char* err = dlerror();
  if (err || !addr) {
    fail(Status::invalid_argument, "entry %zu ('%s'): symbol '%s' is not exported by the library (%s)", index,
         e.name.c_str(), e.symbol.c_str(), err ? err : "dlsym returned NULL");
  }
  Dl_info info{};
  void* symp = nullptr;
  const bool found = dladdr1(addr, &info, &symp, RTLD_DL_SYMENT) != 0;
  const auto* sym = static_cast<const ElfW(Sym)*>(symp);
  if (!found || !sym) {
    fail(Status::invalid_argument, "entry %zu ('%s'): symbol '%s' has no ELF symbol entry; expected a function",
         index, e.name.c_str(), e.symbol.c_str());
  }
  const unsigned type = ELF64_ST_TYPE(sym->st_info);
  if (type != STT_FUNC && type != STT_GNU_IFUNC) {
    fail(Status::invalid_argument, "entry %zu ('%s'): symbol '%s' is ELF type %s, not a function; expected STT_FUNC or "
         "STT_GNU_IFUNC", index, e.name.c_str(), e.symbol.c_str(), elf_type_name(type));
  }
  void* owner = nullptr;
  Dl_info info2{};
  if (dladdr1(addr, &info2, &owner, RTLD_DL_LINKMAP) && owner != self) {
    fail(Status::invalid_argument, "entry %zu ('%s'): symbol '%s' is defined in %s, not in the plugin; expected the "
         "plugin's own function", index, e.name.c_str(), e.symbol.c_str(), info2.dli_fname ? info2.dli_fname : "?");
  }
  void (*fn)() = nullptr;
  static_assert(sizeof fn == sizeof addr, "function and data pointers have one size on every platform weft runs on");
  std::memcpy(&fn, &addr, sizeof fn);
  return fn;
}

template <typename Fn>
Fn as(void (*fn)()) {
  return reinterpret_cast<Fn>(fn);
}

// Registers every kind entry of p (FUNCTION entries only get a call interface). Runs after every
// check passed, so it cannot refuse halfway.
void register_kinds(LoadedPlugin& p) {
  std::map<std::string, Codec> codecs;  // by codec name, filled part by part
  auto origin = [&](const std::string& name) { return Origin{name, p.name, p.path}; };
  for (LoadedEntry& le : p.entries) {
    const Entry& e = le.entry;
    switch (e.kind) {
      case Kind::function: break;
      case Kind::reduce_op: {
        CustomOp op;
        op.origin = origin(e.name);
        op.fn = as<ReduceFn>(le.fn);
        for (int d : e.dtypes) op.dtype_mask |= 1u << d;
        le.id = add_op(std::move(op));
        break;
      }
      case Kind::codec_bytes: codecs[e.name.substr(0, e.name.rfind('.'))].bytes = as<CodecBytesFn>(le.fn); break;
      case Kind::codec_encode: codecs[e.name.substr(0, e.name.rfind('.'))].encode = as<CodecEncodeFn>(le.fn); break;
      case Kind::codec_decode: codecs[e.name.substr(0, e.name.rfind('.'))].decode = as<CodecDecodeFn>(le.fn); break;
      case Kind::router: le.id = add_router(Router{origin(e.name), as<RouterFn>(le.fn)}); break;
      case Kind::schedule: le.id = add_schedule(ScheduleGenerator{origin(e.name), as<ScheduleFn>(le.fn)}); break;
      case Kind::cost_model: le.id = add_cost_model(CostModel{origin(e.name), as<CostFn>(le.fn)}); break;
    }
  }
  // Codecs in the order their first part appears, so ids follow the manifest on every rank.
  for (LoadedEntry& le : p.entries) {
    if (le.entry.kind < Kind::codec_bytes || le.entry.kind > Kind::codec_decode) continue;
    const std::string codec = le.entry.name.substr(0, le.entry.name.rfind('.'));
    auto it = codecs.find(codec);
    if (it != codecs.end()) {
      it->second.origin = origin(codec);
      const int id = add_codec(std::move(it->second));
      codecs.erase(it);
      for (LoadedEntry& part : p.entries) {
        const bool is_part = part.entry.kind >= Kind::codec_bytes && part.entry.kind <= Kind::codec_decode;
        if (is_part && part.entry.name.substr(0, part.entry.name.rfind('.')) == codec) part.id = id;
      }
    }
  }
}

LoadedPlugin* open_and_check(const std::string& path, void* handle) {
  dlerror();
  void* sym = dlsym(handle, kManifestSymbol);
  const char* err = dlerror();
  if (err || !sym) {
    fail(Status::invalid_argument, "no manifest: the library does not export %s() (%s); expected a weft plugin "
         "(weft/plugin.h)", kManifestSymbol, err ? err : "dlsym returned NULL");
  }
  using ManifestFn = const void* (*)(size_t*);
  ManifestFn manifest_fn;
  std::memcpy(&manifest_fn, &sym, sizeof sym);
  size_t size = 0;
  const void* bytes = manifest_fn(&size);
  if (!bytes) fail(Status::invalid_argument, "%s() returned NULL; expected the manifest's bytes", kManifestSymbol);
  Manifest m = parse_manifest(bytes, size);

  link_map* self = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &self) != 0) self = nullptr;
  auto p = std::make_unique<LoadedPlugin>();
  p->path = path;
  p->handle = handle;
  p->name = m.name;
  p->version = m.version;
  p->abi_major = m.abi_major;
  p->abi_minor = m.abi_minor;
  p->entries.reserve(m.entries.size());
  for (size_t i = 0; i < m.entries.size(); ++i) {
    LoadedEntry le;
    le.fn = resolve(handle, self, m.entries[i], i);
    le.call = std::make_unique<CallInterface>(m.entries[i].signature);
    le.entry = std::move(m.entries[i]);
    p->entries.push_back(std::move(le));
  }
  for (size_t i = 0; i < p->entries.size(); ++i) p->by_name.emplace(p->entries[i].entry.name, i);
  register_kinds(*p);
  return p.release();
}

}  // namespace

const LoadedPlugin& load_plugin(const std::string& path) {
  if (path.empty()) fail(Status::invalid_argument, "path is empty; expected a plugin's shared library");
  std::lock_guard<std::mutex> lock(load_mutex());
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    fail(Status::invalid_argument, "plugin '%s': cannot load it as a shared library: %s", path.c_str(),
         err ? err : "dlopen failed");
  }
  if (auto it = loaded().find(handle); it != loaded().end()) return *it->second;
  try {
    LoadedPlugin* p = open_and_check(path, handle);
    loaded().emplace(handle, p);
    return *p;
  } catch (const Error& e) {
    // The library stays mapped (dlclose is never safe for plugins' runtimes) but nothing of it
    // was registered; a later load of the same file checks it again and fails again.
    throw Error(e.status(), "plugin '" + path + "': " + e.message());
  }
}

void call_entry(const LoadedEntry& entry, const Value* args, size_t nargs, Value* result) {
  call(*entry.call, entry.fn, entry.entry.name, args, nargs, result);
}

}  // namespace weft::plugin
