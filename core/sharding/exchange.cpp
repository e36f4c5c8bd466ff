#include "core/sharding/exchange.h"

#include <map>
#include <utility>

namespace weft::shard {

std::vector<Transfer> route_exchange(const Sharded& src, const Layout& src_layout, const Sharded& dst,
                                     const Layout& dst_layout) {
  const mesh::Mesh& A = *src.mesh;
  const mesh::Mesh& B = *dst.mesh;
  // Source boxes with their replicas. Kept PARTIAL dims are part of the key: members differing
  // there hold different terms of the same box.
  using Key = std::pair<std::vector<int64_t>, std::vector<int>>;  // (offset then shape, partial coords)
  std::map<Key, std::vector<int>> replicas;
  std::map<Key, Box> boxes;
  for (int p = 0; p < A.size(); ++p) {
    const Box b = A.box_of(p, src.global, src_layout);
    if (b.numel() == 0) continue;
    Key k;
    k.first = b.offset;
    k.first.insert(k.first.end(), b.shape.begin(), b.shape.end());
    const std::vector<int> c = A.coords_of(p);
    for (size_t m = 0; m < src_layout.size(); ++m) {
      if (src_layout[m].is_partial()) k.second.push_back(c[m]);
    }
    replicas[k].push_back(p);
    boxes[k] = b;
  }
  std::vector<Transfer> routes;
  for (int q = 0; q < B.size(); ++q) {
    const Box want = B.box_of(q, dst.global, dst_layout);
    if (want.numel() == 0) continue;
    std::vector<int> partial_coords;
    const std::vector<int> qc = B.coords_of(q);
    for (size_t m = 0; m < src_layout.size(); ++m) {
      if (src_layout[m].is_partial()) partial_coords.push_back(qc[m]);
    }
    const int q_rank = B.parent_rank(q);
    for (const auto& [key, sources] : replicas) {
      if (key.second != partial_coords) continue;
      const Box piece = intersect(boxes[key], want);
      if (piece.numel() == 0) continue;
      int chosen = sources[static_cast<size_t>(q) % sources.size()];
      for (int s : sources) {
        if (A.parent_rank(s) == q_rank) chosen = s;
      }
      routes.push_back({chosen, q, piece});
    }
  }
  return routes;
}

std::vector<uint64_t> exchange_bytes(const Sharded& src, const Sharded& dst, const std::vector<Transfer>& routes) {
  std::vector<uint64_t> bytes(static_cast<size_t>(src.mesh->size()), 0);
  const size_t elem = dtype_size(src.dtype);
  for (const Transfer& t : routes) {
    if (src.mesh->parent_rank(t.src_pos) == dst.mesh->parent_rank(t.dst_pos)) continue;
    bytes[static_cast<size_t>(t.src_pos)] += static_cast<uint64_t>(t.box.numel()) * elem;
  }
  return bytes;
}

}  // namespace weft::shard
