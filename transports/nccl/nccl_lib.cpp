#include "transports/nccl/nccl_lib.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "core/common/log.h"
#include "core/common/status.h"

#ifndef WEFT_NCCL_BUILD_LIBRARY
#define WEFT_NCCL_BUILD_LIBRARY ""
#endif
// The name looked up on the library path. A CUDA-emulated build (tests/cuda_emulator) names its
// stand-in here, so that the real NCCL (which would need a real GPU) is never loaded by mistake.
#ifndef WEFT_NCCL_SYSTEM_LIBRARY
#define WEFT_NCCL_SYSTEM_LIBRARY "libnccl.so.2"
#endif

namespace weft::gpu {
namespace {

constexpr int kMinVersion = NCCL_VERSION(2, 18, 0);

struct Loaded {
  NcclApi api;
  bool ok = false;
  std::string why;
};

template <class F>
bool bind(void* lib, const char* name, F& slot, std::string& why) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  if (!slot) why = format("the NCCL library has no %s", name);
  return slot != nullptr;
}

Loaded load() {
  Loaded out;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("WEFT_NCCL_LIBRARY"); env && *env) candidates.emplace_back(env);
  candidates.emplace_back(WEFT_NCCL_SYSTEM_LIBRARY);
  if (*WEFT_NCCL_BUILD_LIBRARY) candidates.emplace_back(WEFT_NCCL_BUILD_LIBRARY);
  void* lib = nullptr;
  std::string tried;
  for (const std::string& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* e = dlerror();
    tried += format("%s%s (%s)", tried.empty() ? "" : "; ", c.c_str(), e ? e : "not found");
  }
  if (!lib) {
    out.why = "NCCL could not be loaded: " + tried;
    return out;
  }
  NcclApi& a = out.api;
  std::string& why = out.why;
  bool ok = bind(lib, "ncclGetVersion", a.GetVersion, why) && bind(lib, "ncclGetUniqueId", a.GetUniqueId, why) &&
            bind(lib, "ncclCommInitRankConfig", a.CommInitRankConfig, why) &&
            bind(lib, "ncclCommSplit", a.CommSplit, why) &&
            bind(lib, "ncclCommFinalize", a.CommFinalize, why) && bind(lib, "ncclCommDestroy", a.CommDestroy, why) &&
            bind(lib, "ncclCommAbort", a.CommAbort, why) &&
            bind(lib, "ncclCommGetAsyncError", a.CommGetAsyncError, why) &&
            bind(lib, "ncclGetErrorString", a.GetErrorString, why) &&
            bind(lib, "ncclGetLastError", a.GetLastError, why) && bind(lib, "ncclAllReduce", a.AllReduce, why) &&
            bind(lib, "ncclBroadcast", a.Broadcast, why) && bind(lib, "ncclReduce", a.Reduce, why) &&
            bind(lib, "ncclAllGather", a.AllGather, why) && bind(lib, "ncclReduceScatter", a.ReduceScatter, why) &&
            bind(lib, "ncclSend", a.Send, why) && bind(lib, "ncclRecv", a.Recv, why) &&
            bind(lib, "ncclGroupStart", a.GroupStart, why) && bind(lib, "ncclGroupEnd", a.GroupEnd, why);
  // The library stays loaded for the life of the process (NCCL's own threads may run code in it).
  if (!ok) return out;
  if (a.GetVersion(&a.version) != ncclSuccess || a.version < kMinVersion) {
    why = format("NCCL %d is too old: weft needs %d or newer", a.version, kMinVersion);
    return out;
  }
  out.ok = true;
  log(LogLevel::info, "NCCL %d.%d.%d loaded", a.version / 10000, (a.version / 100) % 100, a.version % 100);
  return out;
}

}  // namespace

const NcclApi* nccl_api(std::string* why) {
  static const Loaded loaded = load();
  if (why) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

std::string nccl_error_text(const NcclApi& api, ncclResult_t r) {
  static const char* const names[] = {"ncclSuccess",      "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError", "ncclInvalidArgument",   "ncclInvalidUsage",
                                      "ncclRemoteError",   "ncclInProgress"};
  const char* name = (r >= 0 && r < 8) ? names[r] : "ncclResult";
  return format("%s: %s", name, api.GetErrorString(r));
}

}  // namespace weft::gpu
