#include "core/sharding/checkpoint_load.h"

#include <cstring>
#include <memory>
#include <unordered_map>

#include "core/common/status.h"
#include "core/device/device_api.h"
#include "core/sharding/checkpoint_files.h"
#include "core/sharding/checkpoint_read.h"

namespace weft::shard {
namespace {

// Up to `max` of the checkpoint's tensor names, for "not found" messages.
std::string some_names(const CheckpointIndex& index, size_t max) {
  std::string s;
  for (size_t i = 0; i < index.tensors.size() && i < max; ++i) s += (i ? ", '" : "'") + index.tensors[i].name + "'";
  if (index.tensors.size() > max) s += ", ...";
  return s.empty() ? "none" : s;
}

// True when this rank's piece of t must hold zeros: a PARTIAL(sum) dim where it is not at 0.
bool zero_term(const Sharded& t) {
  for (size_t m = 0; m < t.layout.size(); ++m) {
    const Placement& p = t.layout[m];
    if (p.is_partial() && p.op == ReduceOp::sum && t.mesh->coords()[m] != 0) return true;
  }
  return false;
}

void zero_fill(const kernels::StridedView& v) {
  static const char zeros[1 << 16] = {};
  const Shape shape(v.shape, v.shape + v.ndim);
  const auto per = static_cast<int64_t>(sizeof zeros / v.elem);
  for_each_block(shape, row_major_strides(shape), per, [&](const Shape& off, const Shape& ext) {
    kernels::StridedView z = kernels::StridedView::contiguous(const_cast<char*>(zeros), v.elem, v.ndim, ext.data());
    kernels::strided_copy(v.sub(off.data(), ext.data()), z);
  });
}

// The stored values of `box` of tensor st into `dst` (host memory, box's shape).
void read_into(ShardReader& reader, const StoredTensor& st, const Box& box, const kernels::StridedView& dst) {
  for (const StoredShard& s : st.shards) {
    const Box common = intersect(box, s.box);
    if (common.numel() == 0) continue;
    Shape rel(common.offset.size());
    for (size_t k = 0; k < rel.size(); ++k) rel[k] = common.offset[k] - box.offset[k];
    reader.read_box(st, s, common, dst.sub(rel.data(), common.shape.data()));
  }
}

}  // namespace

void checkpoint_load(const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<std::shared_ptr<const Sharded>>& tensors) {
  const CheckpointIndex index = read_index(dir);
  const std::string index_path = join_path(dir, kIndexFile);
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < index.tensors.size(); ++i) by_name.emplace(index.tensors[i].name, i);

  // Every check before the first byte is written.
  std::vector<const StoredTensor*> stored(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const Sharded& t = *tensors[i];
    auto it = by_name.find(names[i]);
    if (it == by_name.end()) {
      fail(Status::invalid_argument, "tensor '%s' (names[%zu]) is not in %s, which holds %zu tensors: %s",
           names[i].c_str(), i, index_path.c_str(), index.tensors.size(), some_names(index, 8).c_str());
    }
    const StoredTensor& st = index.tensors[it->second];
    if (st.dtype != t.dtype || st.shape != t.global) {
      fail(Status::mismatch, "tensor '%s': %s stores dtype %s shape %s but tensors[%zu] is dtype %s shape %s",
           names[i].c_str(), index_path.c_str(), dtype_name(st.dtype), describe_shape(st.shape).c_str(), i,
           dtype_name(t.dtype), describe_shape(t.global).c_str());
    }
    if (t.on_device && t.mesh->member()) {
      const std::string arg = format("tensors[%zu] ('%s')", i, names[i].c_str());
      gpu::check_device_view(t.local, t.device, arg.c_str());
    }
    check_coverage(st, index_path);
    stored[i] = &st;
  }

  ShardReader reader(dir);
  for (size_t i = 0; i < names.size(); ++i) {
    const Sharded& t = *tensors[i];
    if (!t.mesh->member()) continue;  // a descriptor holds no data
    const Box box = t.box_of(-1);
    if (box.numel() == 0) continue;
    if (t.on_device) {
      // Read into host memory (zeros for a zero term), then one copy into the device piece.
      std::unique_ptr<char[]> staged(new char[static_cast<size_t>(box.numel()) * dtype_size(t.dtype)]());
      const kernels::StridedView host =
          kernels::StridedView::contiguous(staged.get(), dtype_size(t.dtype), t.ndim(), box.shape.data());
      if (!zero_term(t)) read_into(reader, *stored[i], box, host);
      gpu::copy_from_host(t.local, staged.get(), t.device);
      continue;
    }
    if (zero_term(t)) {
      zero_fill(t.local);
      continue;
    }
    read_into(reader, *stored[i], box, t.local);
  }
}

void checkpoint_verify(const std::string& dir, const CheckpointIndex& index) {
  const std::string index_path = join_path(dir, kIndexFile);
  ShardReader reader(dir);
  for (const StoredTensor& t : index.tensors) {
    check_coverage(t, index_path);
    for (const StoredShard& s : t.shards) reader.verify(t, s);
  }
}

}  // namespace weft::shard
