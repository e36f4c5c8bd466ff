// NCCL, loaded at run time (dlopen) rather than linked.
//
// Why: libweft.so must load and run its host paths on machines without NCCL or a GPU, and a
// framework that already carries its own NCCL (PyTorch's pip wheels do) should share that one
// instead of getting a second copy. The function types come from the nccl.h weft was compiled
// against (decltype), so a signature can never drift from the header.
//
// Search order: WEFT_NCCL_LIBRARY (a path), then "libnccl.so.2" through the loader (which also
// finds a copy the process has loaded already), then the library found at build time.
// NCCL 2.18 or newer is required (non-blocking communicators, ncclCommSplit, ncclGetLastError).
#pragma once

#include <nccl.h>

#include <string>

namespace weft::gpu {

struct NcclApi {
  int version = 0;  // NCCL_VERSION_CODE of the loaded library
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommSplit) CommSplit = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclReduce) Reduce = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
};

// The loaded API, or nullptr (with the reason in *why) when no usable NCCL was found. Loaded
// once per process; thread-safe.
const NcclApi* nccl_api(std::string* why = nullptr);

// "ncclRemoteError: remote process exited or there was a network error" for messages.
std::string nccl_error_text(const NcclApi& api, ncclResult_t r);

}  // namespace weft::gpu
