#include "core/mesh/mesh.h"

#include <algorithm>
#include <set>

#include "core/collectives/collectives.h"
#include "core/comm/create.h"
#include "core/common/status.h"

namespace weft::mesh {
namespace {

constexpr size_t kMaxName = 31;  // WEFT_MESH_MAX_NAME

void check_shape_and_names(const std::vector<int>& shape, const std::vector<std::string>& names) {
  if (shape.empty() || shape.size() > static_cast<size_t>(shard::kMaxMeshDims)) {
    fail(Status::invalid_argument, "ndims is %zu; a mesh has 1 to %d dims", shape.size(), shard::kMaxMeshDims);
  }
  for (size_t m = 0; m < shape.size(); ++m) {
    if (shape[m] < 1) fail(Status::invalid_argument, "shape[%zu] is %d; mesh dims have at least 1 rank", m, shape[m]);
  }
  std::set<std::string> seen;
  for (size_t m = 0; m < names.size(); ++m) {
    if (names[m].empty()) fail(Status::invalid_argument, "dim_names[%zu] is empty; dims need a name", m);
    if (names[m].size() > kMaxName) {
      fail(Status::invalid_argument, "dim_names[%zu] '%s' has %zu characters; at most %zu", m, names[m].c_str(),
           names[m].size(), kMaxName);
    }
    if (!seen.insert(names[m]).second) {
      fail(Status::invalid_argument, "dim_names[%zu] '%s' repeats an earlier dim's name; names must be distinct", m,
           names[m].c_str());
    }
  }
}

void check_ranks(const std::vector<int>& ranks, int parent_size, int64_t product) {
  if (static_cast<int64_t>(ranks.size()) != product) {
    fail(Status::invalid_argument, "the mesh shape holds %lld ranks but %zu ranks were given (%s)",
         static_cast<long long>(product), ranks.size(),
         ranks.size() == static_cast<size_t>(parent_size) ? "all of comm" : "config->ranks");
  }
  std::vector<bool> used(static_cast<size_t>(parent_size), false);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= parent_size) {
      fail(Status::invalid_argument, "config->ranks[%zu] is %d; comm has ranks 0..%d", i, r, parent_size - 1);
    }
    if (used[static_cast<size_t>(r)]) {
      fail(Status::invalid_argument, "config->ranks[%zu] repeats rank %d; mesh ranks must be distinct", i, r);
    }
    used[static_cast<size_t>(r)] = true;
  }
}

// FNV-1a over everything that must agree across ranks.
uint64_t fingerprint(const std::vector<int>& shape, const std::vector<std::string>& names,
                     const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (int s : shape) mix(&s, sizeof s);
  for (const auto& n : names) mix(n.c_str(), n.size() + 1);
  for (int r : ranks) mix(&r, sizeof r);
  return h;
}

// Row-major index of coords over the dims in (or not in) mask.
int linear(const std::vector<int>& shape, const std::vector<int>& coords, unsigned mask, bool inside) {
  int idx = 0;
  for (size_t m = 0; m < shape.size(); ++m) {
    if (((mask >> m) & 1u) != (inside ? 1u : 0u)) continue;
    idx = idx * shape[m] + coords[m];
  }
  return idx;
}

}  // namespace

std::shared_ptr<Mesh> Mesh::create(const std::shared_ptr<Comm>& parent, std::vector<int> shape,
                                   std::vector<std::string> names, std::vector<int> ranks) {
  if (names.empty()) {
    for (size_t m = 0; m < shape.size(); ++m) names.push_back(std::string("d").append(std::to_string(m)));
  }
  check_shape_and_names(shape, names);
  int64_t product = 1;
  for (int s : shape) product *= s;
  if (ranks.empty()) {
    ranks.resize(static_cast<size_t>(parent->size()));
    for (int r = 0; r < parent->size(); ++r) ranks[static_cast<size_t>(r)] = r;
  }
  check_ranks(ranks, parent->size(), product);

  // Every rank must describe the same grid: a mesh some ranks see differently would pair the
  // wrong ranks in every later collective.
  const uint64_t mine = fingerprint(shape, names, ranks);
  std::vector<uint64_t> all(static_cast<size_t>(parent->size()));
  coll::allgather(*parent, &mine, all.data(), 1, DType::u64);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != mine) {
      fail(Status::mismatch, "%s: rank %zu passed a different mesh (shape, dim names or ranks) than rank %d",
           parent->describe().c_str(), r, parent->rank());
    }
  }

  auto mesh = std::shared_ptr<Mesh>(new Mesh());
  mesh->shape_ = std::move(shape);
  mesh->names_ = std::move(names);
  mesh->parent_ranks_ = std::move(ranks);
  mesh->parent_ = parent;
  mesh->pos_ = mesh->position_of_parent_rank(parent->rank());
  if (mesh->pos_ >= 0) mesh->coords_ = mesh->coords_of(mesh->pos_);

  const unsigned nmasks = 1u << mesh->shape_.size();
  for (unsigned mask = 1; mask < nmasks; ++mask) {
    CommConfig cfg = parent->config();
    cfg.name = parent->config().name + ":mesh";
    for (size_t m = 0; m < mesh->shape_.size(); ++m) {
      if ((mask >> m) & 1u) cfg.name.append(".").append(mesh->names_[m]);
    }
    int color = -1;
    int key = 0;
    if (mesh->member()) {
      color = linear(mesh->shape_, mesh->coords_, mask, false);
      key = linear(mesh->shape_, mesh->coords_, mask, true);
    }
    mesh->groups_[mask] = split_comm(*parent, color, key, std::move(cfg));
  }
  return mesh;
}

int Mesh::position_of_parent_rank(int parent_rank) const {
  auto it = std::find(parent_ranks_.begin(), parent_ranks_.end(), parent_rank);
  return it == parent_ranks_.end() ? -1 : static_cast<int>(it - parent_ranks_.begin());
}

std::vector<int> Mesh::coords_of(int pos) const {
  std::vector<int> c(shape_.size());
  for (size_t m = shape_.size(); m-- > 0;) {
    c[m] = pos % shape_[m];
    pos /= shape_[m];
  }
  return c;
}

int Mesh::position_of(const std::vector<int>& coords) const {
  int pos = 0;
  for (size_t m = 0; m < shape_.size(); ++m) pos = pos * shape_[m] + coords[m];
  return pos;
}

}  // namespace weft::mesh
