#include "core/comm/create.h"

#include <algorithm>
#include <cstdint>

#include "core/collectives/collectives.h"
#include "core/comm/channel.h"
#include "core/common/log.h"
#include "core/device/device_api.h"

namespace weft {
namespace {

// Sets up shared memory while every rank is still inside the creating call, so the first
// collective does not carry the setup (and a rank that never calls it cannot hang the rest
// in setup, where a timeout could only name rank 0).
std::shared_ptr<Comm> with_shm(std::shared_ptr<Comm> comm) {
  if (comm->shm_possible()) {
    Channel ch(*comm, "shared-memory setup", "");
    comm->shm(ch);
  }
  return comm;
}

// Device memory (core/device): picks the GPU and sets up NCCL, likewise while every rank is
// inside the creating call.
std::shared_ptr<Comm> with_device(std::shared_ptr<Comm> comm, const Comm* parent,
                                  std::shared_ptr<gpu::SplitDevice> split = nullptr) {
  gpu::attach(*comm, parent, std::move(split));
  return comm;
}

}  // namespace

std::shared_ptr<Comm> create_root_comm(const WorldSetup& setup, CommConfig config) {
  if (setup.size > kMaxRanks) fail(Status::unsupported, "%d ranks requested; weft supports up to %d", setup.size, kMaxRanks);
  std::shared_ptr<World> world = World::create(setup);
  if (!world->try_reserve_comm_id(0)) fail(Status::internal, "a fresh world already had communicator id 0");
  std::vector<int> members(static_cast<size_t>(setup.size));
  for (int r = 0; r < setup.size; ++r) members[static_cast<size_t>(r)] = r;
  return with_device(
      with_shm(std::make_shared<Comm>(std::move(world), std::move(members), setup.rank, 0u, std::move(config))),
      nullptr);
}

namespace {

// Agree on an id no participating process has used (two rounds per attempt: propose the
// largest next-unused id, then confirm everyone could reserve it; a concurrent split on
// another thread may have taken it meanwhile).
uint32_t agree_on_id(Comm& parent, bool participates) {
  uint32_t hint = 1;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int64_t proposal = parent.world().next_unused_comm_id(hint);
    coll::allreduce(parent, &proposal, &proposal, 1, DType::i64, ReduceOp::max);
    if (proposal > static_cast<int64_t>(kMaxCommId)) {
      fail(Status::unsupported, "communicator ids exhausted: %u communicators were created from this one", kMaxCommId);
    }
    uint32_t id = static_cast<uint32_t>(proposal);
    bool reserved = !participates || parent.world().try_reserve_comm_id(id);
    int64_t conflict = reserved ? 0 : 1;
    coll::allreduce(parent, &conflict, &conflict, 1, DType::i64, ReduceOp::max);
    if (conflict == 0) return id;
    if (participates && reserved) parent.world().release_comm_id(id);
    hint = id + 1;
  }
  fail(Status::internal, "could not agree on a communicator id after 1000 attempts");
}

}  // namespace

std::shared_ptr<Comm> split_comm(Comm& parent, int color, int key, CommConfig config) {
  const int n = parent.size();
  int32_t mine[2] = {color < 0 ? -1 : color, key};
  std::vector<int32_t> all(static_cast<size_t>(2 * n));
  coll::allgather(parent, mine, all.data(), 2, DType::i32);

  const bool participates = color >= 0;
  uint32_t id = agree_on_id(parent, participates);
  // Every parent rank takes part in splitting the device side (NCCL), the left-out ones too.
  std::shared_ptr<gpu::SplitDevice> device_split = gpu::split_device(parent, color, key);
  if (!participates) return nullptr;

  std::vector<int> order;
  for (int r = 0; r < n; ++r) {
    if (all[static_cast<size_t>(2 * r)] == color) order.push_back(r);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return all[static_cast<size_t>(2 * a + 1)] < all[static_cast<size_t>(2 * b + 1)];
  });
  std::vector<int> members;
  int my_rank = -1;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] == parent.rank()) my_rank = static_cast<int>(i);
    members.push_back(parent.world_rank_of(order[i]));
  }
  log(LogLevel::info, "%s split: color %d -> %zu ranks, id %u", parent.describe().c_str(), color, members.size(), id);
  return with_device(
      with_shm(std::make_shared<Comm>(parent.world_ptr(), std::move(members), my_rank, id, std::move(config))),
      &parent, std::move(device_split));
}

}  // namespace weft
