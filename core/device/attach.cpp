// attach(): a new communicator's GPU and NCCL communicator (device_api.h).
//
// Every decision that decides whether ranks communicate is made from data all ranks share (the
// device table, the outcome of host collectives), so no rank can wait for a step another rank
// skipped. Local problems (no GPU, bad WEFT_DEVICE, no NCCL library, a failing CUDA call) never
// throw here: they become "no device" or "no NCCL" for this rank, and the agreement steps make
// every rank fall back together.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/collectives/collectives.h"
#include "core/common/log.h"
#include "core/device/device_api.h"
#include "core/device/device_context.h"
#if WEFT_HAVE_NCCL
#include "core/device/nccl_comm.h"
#endif

namespace weft::gpu {
namespace {

std::string uuid_text(const uint8_t (&u)[16]) {
  std::string s;
  for (int i = 0; i < 16; ++i) s += format("%02x%s", u[i], (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
  return s;
}

// WEFT_DEVICE, else local rank modulo the device count.
int choose_device(const Comm& comm, int count, std::string* why) {
  if (count <= 0) return -1;
  if (const char* v = std::getenv("WEFT_DEVICE"); v && *v) {
    errno = 0;
    char* end = nullptr;
    long d = std::strtol(v, &end, 10);
    if (errno || end == v || *end || d < 0 || d >= count) {
      *why = format("WEFT_DEVICE='%s' is not a device index 0..%d", v, count - 1);
      log(LogLevel::warn, "%s: %s; device buffers are refused on this rank", comm.describe().c_str(), why->c_str());
      return -1;
    }
    return static_cast<int>(d);
  }
  return comm.local_rank() % count;
}

DeviceInfo describe_device(int device, std::string* why) {
  DeviceInfo info;
  std::memset(&info, 0, sizeof(info));
  info.device = -1;
  if (device < 0) return info;
  cudaDeviceProp prop{};
  cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    *why = format("cudaGetDeviceProperties(%d): %s", device, cuda_error_text(err).c_str());
    return info;
  }
  info.device = device;
  std::memcpy(info.uuid, prop.uuid.bytes, sizeof(info.uuid));
  return info;
}

// Whether every member has a GPU of its own (NCCL refuses two ranks on one GPU); else why not.
bool one_gpu_each(const Comm& comm, const DeviceTable& table, std::string* why) {
  const int n = comm.size();
  for (int r = 0; r < n; ++r) {
    const DeviceInfo& a = table[static_cast<size_t>(comm.world_rank_of(r))];
    if (a.device < 0) {
      *why = format("rank %d has no GPU", r);
      return false;
    }
    for (int q = 0; q < r; ++q) {
      const DeviceInfo& b = table[static_cast<size_t>(comm.world_rank_of(q))];
      if (std::memcmp(a.uuid, b.uuid, sizeof(a.uuid)) == 0) {
        *why = format("ranks %d and %d share GPU %s (NCCL needs one GPU per rank)", q, r, uuid_text(a.uuid).c_str());
        return false;
      }
    }
  }
  return true;
}

bool nccl_disabled_by_env() {
  const char* v = std::getenv("WEFT_NCCL");
  return v && std::strcmp(v, "0") == 0;
}

}  // namespace

struct SplitDevice {
#if WEFT_HAVE_NCCL
  std::unique_ptr<NcclComm> nccl;
#endif
  std::string why_not;  // why the split gave no NCCL communicator, when the parent had one
};

std::shared_ptr<SplitDevice> split_device(Comm& parent, int color, int key) {
#if WEFT_HAVE_NCCL
  DeviceContext* pctx = context_of(parent);
  // Whether the parent has NCCL is the same on every rank (attach() agreed on it).
  if (!pctx || !pctx->nccl() || nccl_disabled_by_env()) return nullptr;
  auto out = std::make_shared<SplitDevice>();
  // A local CUDA problem must not keep this rank from the split's agreement step.
  bool usable = true;
  std::optional<DeviceGuard> guard;
  try {
    guard.emplace(pctx->device());
  } catch (const Error& e) {
    usable = false;
    out->why_not = e.message();
  }
  // Errors from the agreement (a broken parent: abort, timeout, a dead rank) fail the split.
  out->nccl = NcclComm::split(parent, *pctx->nccl(), usable, color, key, &out->why_not);
  return out;
#else
  (void)parent, (void)color, (void)key;
  return nullptr;
#endif
}

void attach(Comm& comm, const Comm* parent, std::shared_ptr<SplitDevice> split) {
  std::string why_count;
  const int count = device_count(&why_count);
  auto ctx = std::make_unique<DeviceContext>(count);
  const DeviceContext* pctx = parent ? context_of(*parent) : nullptr;
  if (pctx) {
    // A rank keeps its GPU: children use the parent's, and its table.
    ctx->device_ = pctx->device_;
    ctx->why_no_device_ = pctx->why_no_device_;
    ctx->table_ = pctx->table_;
  } else {
    std::string why = why_count;
    int device = choose_device(comm, count, &why);
    DeviceInfo mine = describe_device(device, &why);
    mine.transport_cuda = comm.world().transport().addresses_cuda_memory() ? 1 : 0;
    ctx->device_ = mine.device;
    ctx->why_no_device_ = why;
    // The root communicator's ranks are the world's ranks, in order.
    auto table = std::make_shared<DeviceTable>(static_cast<size_t>(comm.size()));
    coll::allgather(comm, &mine, table->data(), sizeof(DeviceInfo), DType::u8);
    ctx->table_ = std::move(table);
  }

  std::string why_not;
  if (!one_gpu_each(comm, *ctx->table_, &why_not)) {
    ctx->why_no_nccl_ = why_not;
#if WEFT_HAVE_NCCL
  } else if (split && split->nccl) {
    ctx->nccl_ = std::move(split->nccl);
    ctx->nccl_->set_timeout(comm.config().timeout);
    log(LogLevel::info, "%s: NCCL communicator split from the parent's (ncclCommSplit)", comm.describe().c_str());
#endif
  } else {
    if (split && !split->why_not.empty()) {
      log(LogLevel::info, "%s: ncclCommSplit gave no communicator (%s); setting NCCL up from scratch",
          comm.describe().c_str(), split->why_not.c_str());
    }
#if WEFT_HAVE_NCCL
    bool usable = !nccl_disabled_by_env();
    std::string local_why = usable ? "" : "WEFT_NCCL=0";
    std::optional<DeviceGuard> guard;
    if (usable) {
      try {
        guard.emplace(ctx->device_);
      } catch (const Error& e) {
        usable = false;
        local_why = e.message();
      }
    }
    ctx->nccl_ = NcclComm::create(comm, usable, &local_why);
    if (!ctx->nccl_) ctx->why_no_nccl_ = local_why.empty() ? "NCCL setup failed" : local_why;
#else
    ctx->why_no_nccl_ = "this weft was built without NCCL";
#endif
  }

  if (ctx->device_ < 0) {
    log(LogLevel::info, "%s: no device memory (%s)", comm.describe().c_str(), ctx->why_no_device_.c_str());
  } else if (ctx->nccl()) {
    log(LogLevel::info, "%s: device memory on CUDA device %d through NCCL", comm.describe().c_str(), ctx->device_);
  } else {
    log(LogLevel::info, "%s: device memory on CUDA device %d staged through pinned host memory; no NCCL: %s",
        comm.describe().c_str(), ctx->device_, ctx->why_no_nccl_.c_str());
  }
  comm.set_device(std::move(ctx));
}

}  // namespace weft::gpu
