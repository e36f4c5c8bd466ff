// weft-info: what this weft is (version, ABI, plugin ABI, what the build includes) and, with
// --plugin PATH, a plugin's manifest as weft reads it. Uses the public library only.
//
//   weft-info                  version, ABIs and build features
//   weft-info --plugin PATH    ... and the plugin's name, version, ABI and every entry
// Exit status: 0 OK, 1 the plugin was refused (the error on stderr), 2 usage.
#include <weft/weft.h>

#include <cstdio>
#include <cstring>
#include <string>

#ifndef WEFT_INFO_CUDA
#define WEFT_INFO_CUDA 0
#endif
#ifndef WEFT_INFO_NCCL
#define WEFT_INFO_NCCL 0
#endif

namespace {

const char* type_name(weft_value_type_t t) {
  static const char* names[] = {"VOID", "I8",  "U8",  "I16", "U16",  "I32",    "U32",    "I64",
                                "U64",  "F32", "F64", "PTR", "SIZE", "TENSOR", "STRING", "FN"};
  const int i = static_cast<int>(t);
  return i >= 0 && i < WEFT_TYPE_NUM ? names[i] : "?";
}

const char* kind_name(weft_plugin_kind_t k) {
  static const char* names[] = {"FUNCTION",     "REDUCE_OP", "CODEC_BYTES", "CODEC_ENCODE",
                                "CODEC_DECODE", "ROUTER",    "SCHEDULE",    "COST_MODEL"};
  const int i = static_cast<int>(k);
  return i >= 0 && i < WEFT_PLUGIN_NUM_KINDS ? names[i] : "?";
}

const char* dtype_name(weft_dtype_t d) {
  static const char* names[] = {"FLOAT64", "FLOAT32", "FLOAT16", "BFLOAT16", "FP8_E4M3", "FP8_E5M2",
                                "INT8",    "UINT8",   "INT32",   "UINT32",   "INT64",    "UINT64"};
  const int i = static_cast<int>(d);
  return i >= 0 && i < static_cast<int>(sizeof names / sizeof *names) ? names[i] : "?";
}

const char* const kHelp =
    "usage: weft-info [--plugin PATH]\n"
    "  Says what this weft is: its version, its C ABI version, the plugin ABI, and whether the\n"
    "  build includes CUDA and NCCL (UCX always). Uses the public library only, so it also shows\n"
    "  which libweft.so the loader found.\n"
    "  --plugin PATH   also load the plugin at PATH as weft_plugin_load does and print its\n"
    "                  manifest: name, version, plugin ABI and every entry (kind, name, dtypes)\n"
    "  -h, --help      this text\n"
    "Exit status: 0 done, 1 the plugin was refused (the reason on stderr), 2 usage.\n";

int usage(const char* why) {
  if (why) std::fprintf(stderr, "weft-info: %s\n", why);
  std::fprintf(stderr, "usage: weft-info [--plugin PATH] (--help says more)\n");
  return 2;
}

void print_weft() {
  int version = 0, abi = 0;
  weft_version(&version, &abi);
  std::printf("weft %d.%d.%d (ABI %d)\n", version / 10000, version / 100 % 100, version % 100, abi);
  std::printf("plugin ABI: %d.%d (extension ids from %d)\n", WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR,
              WEFT_PLUGIN_ID_BASE);
  std::printf("build: UCX yes, CUDA %s, NCCL %s\n", WEFT_INFO_CUDA ? "yes" : "no", WEFT_INFO_NCCL ? "yes" : "no");
}

int print_plugin(const char* path) {
  weft_plugin_t plugin = nullptr;
  if (weft_plugin_load(path, &plugin) != WEFT_OK) {
    std::fprintf(stderr, "weft-info: %s\n", weft_last_error());
    return 1;
  }
  weft_plugin_info_t info = WEFT_PLUGIN_INFO_INIT;
  weft_plugin_info(plugin, &info);
  std::printf("\nplugin %s %s\n  path: %s\n  plugin ABI: %d.%d\n  entries: %zu\n", info.name, info.version, info.path,
              info.abi_major, info.abi_minor, info.nentries);
  for (size_t i = 0; i < info.nentries; ++i) {
    weft_plugin_entry_t e = WEFT_PLUGIN_ENTRY_INIT;
    weft_plugin_entry(plugin, i, &e);
    std::string sig = std::string(type_name(e.ret)) + " " + e.name + "(";
    for (size_t a = 0; a < e.nargs; ++a) sig += std::string(a ? ", " : "") + type_name(e.args[a]);
    sig += ")";
    std::printf("\n  [%zu] %s %s\n      symbol: %s\n      signature: %s\n", i, kind_name(e.kind), e.name, e.symbol,
                sig.c_str());
    if (e.ndtypes > 0) {
      std::string d;
      for (size_t k = 0; k < e.ndtypes; ++k) d += std::string(k ? ", " : "") + dtype_name(e.dtypes[k]);
      std::printf("      dtypes: %s\n", d.c_str());
    }
    if (e.doc && *e.doc) std::printf("      doc: %s\n", e.doc);
    if (e.id >= 0) std::printf("      id: %d\n", e.id);
  }
  weft_plugin_destroy(plugin);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* plugin = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--plugin") == 0) {
      if (i + 1 >= argc) return usage("--plugin needs a path");
      if (plugin) return usage("--plugin given twice");
      plugin = argv[++i];
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::fputs(kHelp, stdout);
      return 0;
    } else {
      return usage(("unknown argument '" + std::string(argv[i]) + "'").c_str());
    }
  }
  print_weft();
  return plugin ? print_plugin(plugin) : 0;
}
