// The structs behind weft_mesh_t and weft_sharded_t, their registries, and the conversion of a
// weft_tensor_t view into core's strided view.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capi/src/handles.h"
#include "core/mesh/mesh.h"
#include "core/sharding/plan.h"
#include "core/sharding/sharded.h"
#include "weft/weft.h"

struct weft_mesh {
  uint64_t magic;
  std::shared_ptr<weft::mesh::Mesh> mesh;
  // Borrowed handles of the mesh's communicators (by dim mask) and of its parent, made once so
  // weft_mesh_comm hands out the same handle every time.
  std::array<weft_comm_t, 1u << weft::shard::kMaxMeshDims> groups{};
  weft_comm_t parent = nullptr;
};

// The plan of the last redistribution from one source into a tensor: a tensor's mesh, layout,
// shape and dtype never change, so the plan for a given source (by serial) stays valid.
struct PlanCache {
  std::mutex mutex;
  uint64_t src_serial = 0;
  std::shared_ptr<const weft::shard::Plan> plan;
};

struct weft_sharded {
  uint64_t magic;
  // Replaced, never changed in place (weft_sharded_set_local), so queued work keeps its view.
  std::shared_ptr<const weft::shard::Sharded> tensor;
  uint64_t serial = 0;  // unique per handle made in this process (plan cache key)
  std::shared_ptr<PlanCache> plans = std::make_shared<PlanCache>();
  // What weft_sharded_local hands back: the caller's view with shape and strides kept here.
  weft_tensor_t view{};
  std::array<int64_t, WEFT_TENSOR_MAX_DIMS> shape{};
  std::array<int64_t, WEFT_TENSOR_MAX_DIMS> strides{};
  bool has_strides = false;
};

namespace weft::capi {

constexpr uint64_t kMeshMagic = 0x6873654d74666577ull;     // "weftMesh"
constexpr uint64_t kShardedMagic = 0x6472685374666577ull;  // "weftShrd"

weft_mesh_t register_mesh(std::unique_ptr<weft_mesh> m);
weft_mesh* lookup_mesh(weft_mesh_t h, const char* arg);
void unregister_mesh(weft_mesh_t h);

weft_sharded_t register_sharded(std::unique_ptr<weft_sharded> s);
weft_sharded* lookup_sharded(weft_sharded_t h, const char* arg);
void unregister_sharded(weft_sharded_t h);

// Placements from C (range-checked enums, PARTIAL ops) for a mesh of `ndims` dims.
shard::Layout read_layout(const weft_placement_t* placements, int ndims, int tensor_ndim);
// A global shape from C: ndim in 0..WEFT_TENSOR_MAX_DIMS, every extent >= 0.
shard::Shape read_shape(int ndim, const int64_t* shape, const char* arg);

// Checks `local` (arg names it) against the expected dtype and local shape and copies it into
// `out` and the handle's shape/stride storage; sets on_device for CUDA memory.
// `t` (dtype, mesh, layout set) gets the view; `out` keeps its shape and strides for
// weft_sharded_local.
void read_local_view(const weft_tensor_t* local, shard::Sharded& t, const char* arg, weft_sharded& out);

// A tensor weft writes into must not have two elements at one address (stride 0 on a dim of
// extent > 1, which is fine for a tensor weft only reads: a broadcast).
void check_writable(const shard::Sharded& t, const char* arg);

}  // namespace weft::capi
