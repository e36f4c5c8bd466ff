#include "core/sharding/checkpoint_save.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "core/common/log.h"
#include "core/device/device_api.h"
#include "core/sharding/checkpoint_agree.h"
#include "core/sharding/checkpoint_crc32c.h"
#include "core/sharding/checkpoint_files.h"
#include "core/sharding/checkpoint_index.h"
#include "core/sharding/redistribute.h"

namespace weft::shard {
namespace {

// Non-contiguous local views are packed through a staging buffer of this size.
constexpr int64_t kStageBytes = int64_t{1} << 20;
// Shards start at multiples of this in their data file (cache lines; room for O_DIRECT later).
constexpr uint64_t kShardAlign = 64;

struct Item {
  std::string name;
  std::shared_ptr<const Sharded> tensor;
};

std::vector<Item> prepare(const Comm& comm, const std::vector<std::string>& names,
                          const std::vector<std::shared_ptr<const Sharded>>& tensors) {
  std::vector<Item> items;
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const Sharded& t = *tensors[i];
    if (names[i].empty()) fail(Status::invalid_argument, "names[%zu] is empty; every tensor needs a name", i);
    if (auto [it, fresh] = seen.emplace(names[i], i); !fresh) {
      fail(Status::invalid_argument, "names[%zu] '%s' repeats names[%zu]; names on one rank must be distinct", i,
           names[i].c_str(), it->second);
    }
    const Comm& parent = *t.mesh->parent();
    if (parent.world_ptr() != comm.world_ptr() || parent.members() != comm.members()) {
      fail(Status::invalid_argument,
           "tensors[%zu] ('%s') is on a mesh made from another communicator; weft_checkpoint_save needs meshes made "
           "from comm (or from a communicator of the same ranks)",
           i, names[i].c_str());
    }
    if (t.on_device && t.mesh->member()) {
      const std::string arg = format("tensors[%zu] ('%s')", i, names[i].c_str());
      gpu::check_device_view(t.local, t.device, arg.c_str());
    }
    items.push_back({names[i], tensors[i]});
  }
  // One order on every rank: PARTIAL tensors are reduced by collectives over their meshes, and
  // ranks that passed their tensors in different orders must still meet in the same one.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.name < b.name; });
  return items;
}

std::string new_save_id() {
  std::random_device rd;
  uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  // random_device may be deterministic on some platforms: mix in the clock and the process.
  id ^= static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  id ^= static_cast<uint64_t>(::getpid()) << 40;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

// This rank's data file of this save: created at the first shard it writes (a rank that writes
// nothing leaves no file), shards packed back to back.
class DataFile {
 public:
  DataFile(const std::string& dir, std::string name, bool durable, int rank)
      : name_(std::move(name)), path_(join_path(dir, name_)), durable_(durable), rank_(rank) {}

  StoredShard write(const kernels::StridedView& v, const Box& box, DType dtype) {
    if (!created_) {
      fd_ = create_new(path_);
      created_ = true;
    }
    const auto e = static_cast<int64_t>(dtype_size(dtype));
    StoredShard s;
    s.box = box;
    s.file = name_;
    s.byte_offset = (end_ + kShardAlign - 1) / kShardAlign * kShardAlign;
    s.byte_length = static_cast<uint64_t>(box.numel() * e);
    ChunkedCrc crc(s.chunk_bytes);
    uint64_t pos = s.byte_offset;
    const bool contiguous = kernels::is_contiguous(v);
    for_each_block(box.shape, row_major_strides(box.shape), std::max<int64_t>(1, kStageBytes / e),
                   [&](const Shape& off, const Shape& ext) {
                     const kernels::StridedView piece = v.sub(off.data(), ext.data());
                     const auto bytes = static_cast<size_t>(piece.numel() * e);
                     const char* src = piece.base;
                     if (!contiguous) {
                       if (stage_.size() < bytes) stage_.resize(bytes);
                       kernels::strided_copy(kernels::StridedView::contiguous(stage_.data(), v.elem, v.ndim,
                                                                              ext.data()),
                                             piece);
                       src = stage_.data();
                     }
                     crc.feed(src, bytes);
                     fd_.write_at(src, bytes, pos);
                     pos += bytes;
                     if (!kill_point_passed_) {
                       kill_point_passed_ = true;
                       test_kill_point("data", rank_);
                     }
                   });
    s.crc = crc.whole();
    s.chunk_crcs = crc.finish();
    end_ = pos;
    return s;
  }

  // Makes the file durable before anyone can name it in an index.
  void finish() {
    if (!created_) return;
    if (durable_) fd_.sync();
    fd_.close();
  }

  // A failed save leaves nothing of its own behind (best effort).
  void discard() {
    if (!created_) return;
    fd_ = Fd();
    ::unlink(path_.c_str());
  }

 private:
  std::string name_, path_;
  bool durable_;
  int rank_;
  Fd fd_;
  bool created_ = false;
  bool kill_point_passed_ = false;
  uint64_t end_ = 0;
  std::vector<char> stage_;
};

bool has_partial(const Sharded& t) {
  return std::any_of(t.layout.begin(), t.layout.end(), [](const Placement& p) { return p.is_partial(); });
}

// One writer per box: the member at coordinate 0 on every mesh dim that does not shard it
// (REPLICATE, and PARTIAL once reduced to REPLICATE).
bool is_writer(const Sharded& t) {
  for (size_t m = 0; m < t.layout.size(); ++m) {
    if (!t.layout[m].is_shard() && t.mesh->coords()[m] != 0) return false;
  }
  return true;
}

// The values this rank stores for t, as a view: its local piece, or for a PARTIAL tensor the
// reduction (PARTIAL dims made REPLICATE) in `storage`. Collective over t's mesh when PARTIAL:
// every member takes part. Same box either way: only SHARD placements decide it.
kernels::StridedView values_of(const Sharded& t, std::unique_ptr<char[]>& storage) {
  if (!has_partial(t)) return t.local;
  Sharded reduced = t;
  for (Placement& p : reduced.layout)
    if (p.is_partial()) p = Placement{};
  const Box box = t.box_of(-1);
  storage.reset(new char[std::max<size_t>(static_cast<size_t>(box.numel()) * dtype_size(t.dtype), 1)]);
  reduced.local = kernels::StridedView::contiguous(storage.get(), dtype_size(t.dtype), t.ndim(), box.shape.data());
  // Where weft_redistribute runs a same-mesh redistribution: the mesh's own communicator.
  t.mesh->whole()->executor().run_blocking([&] { redistribute(t, reduced); });
  return reduced.local;
}

// A device tensor as a host one: its local piece copied into `staged` (contiguous). The files
// are written from host memory, and a PARTIAL tensor is then reduced on the host like any other
// (over the mesh's communicators, whatever memory the other members hold): the copy comes first
// because the reduction is collective, and a member whose pieces are host memory takes the host
// path. A failed copy is returned in *error and leaves zeros, which the reduction can still use,
// so that the other members are not left waiting in it.
Sharded staged_on_host(const Sharded& t, std::unique_ptr<char[]>& staged, std::optional<Error>* error) {
  Sharded h = t;
  h.on_device = false;
  h.device = -1;
  const Box box = t.box_of(-1);
  staged.reset(new char[std::max<size_t>(static_cast<size_t>(box.numel()) * dtype_size(t.dtype), 1)]());
  h.local = kernels::StridedView::contiguous(staged.get(), dtype_size(t.dtype), t.ndim(), box.shape.data());
  *error = capture([&] { gpu::copy_to_host(staged.get(), t.local, t.device); });
  return h;
}

// Step 3 + 4 on this rank: every tensor's entry for the index, with the shards it wrote. A
// failed write (or copy of a device piece to host memory) stops the writing but not the
// reductions still to come, so the other members of those meshes are not left waiting in a
// collective; a failed reduction stops everything (its communicator is broken anyway). Returns
// the first error.
std::optional<Error> save_tensors(const std::vector<Item>& items, DataFile& file, CheckpointIndex& mine) {
  std::optional<Error> first;
  for (const Item& item : items) {
    const Sharded& given = *item.tensor;
    StoredTensor rec{item.name, given.dtype, given.global, {}};
    if (given.mesh->member()) {  // a descriptor: its dtype and shape still take part in the check
      std::unique_ptr<char[]> staged;
      std::optional<Error> stage_error;
      // Staged where its values are needed: written here, or a term of a reduction.
      const bool stage = given.on_device && (has_partial(given) || is_writer(given));
      const Sharded t = stage ? staged_on_host(given, staged, &stage_error) : given;
      if (stage_error && !first) first = stage_error;
      std::unique_ptr<char[]> storage;
      kernels::StridedView view;
      if (auto e = capture([&] { view = values_of(t, storage); })) return first ? first : e;
      const Box box = t.box_of(-1);
      if (!first && is_writer(t) && box.numel() > 0) {
        first = capture([&] { rec.shards.push_back(file.write(view, box, t.dtype)); });
      }
    }
    mine.tensors.push_back(std::move(rec));
  }
  if (!first) first = capture([&] { file.finish(); });
  return first;
}

// Rank 0: the ranks' shard lists merged into one index, checked.
CheckpointIndex merge(const std::vector<std::string>& parts, const std::string& save_id, const std::string& what) {
  std::map<std::string, std::pair<StoredTensor, int>> by_name;  // sorted: the index lists names in order
  for (size_t r = 0; r < parts.size(); ++r) {
    CheckpointIndex part = decode_index(parts[r].data(), parts[r].size(), format("rank %zu's shard list", r));
    for (StoredTensor& t : part.tensors) {
      auto [it, fresh] = by_name.try_emplace(t.name, t, static_cast<int>(r));
      if (fresh) continue;
      StoredTensor& have = it->second.first;
      if (have.dtype != t.dtype || have.shape != t.shape) {
        fail(Status::mismatch, "%s: tensor '%s' is dtype %s shape %s on rank %d but dtype %s shape %s on rank %zu",
             what.c_str(), t.name.c_str(), dtype_name(have.dtype), describe_shape(have.shape).c_str(),
             it->second.second, dtype_name(t.dtype), describe_shape(t.shape).c_str(), r);
      }
      for (StoredShard& s : t.shards) have.shards.push_back(std::move(s));
    }
  }
  CheckpointIndex index;
  index.save_id = save_id;
  index.nranks = static_cast<int>(parts.size());
  for (auto& [name, entry] : by_name) {
    check_coverage(entry.first, what + " (every member of a tensor's mesh must pass it, under one name)");
    index.tensors.push_back(std::move(entry.first));
  }
  return index;
}

// Removes the files of earlier (or interrupted) saves that `index` does not name. Failing to
// remove one does not fail the save: the new checkpoint is already in place.
void remove_unnamed(const std::string& dir, const CheckpointIndex& index) {
  std::set<std::string> named;
  for (const StoredTensor& t : index.tensors)
    for (const StoredShard& s : t.shards) named.insert(s.file);
  std::vector<std::string> names;
  try {
    names = list_dir(dir);
  } catch (const Error& e) {
    log(LogLevel::warn, "checkpoint save: old files are left in place: %s", e.message().c_str());
  }
  for (const std::string& name : names) {
    if (!is_checkpoint_file_name(name) || named.count(name)) continue;
    const std::string path = join_path(dir, name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      log(LogLevel::warn, "checkpoint save: cannot remove the old file %s: %s", path.c_str(), std::strerror(errno));
    }
  }
}

// After a failed commit: this save's own files (best effort; the next save removes leftovers).
void remove_save_files(const std::string& dir, const std::string& save_id) {
  try {
    const std::string prefix = "data-" + save_id + "-r";
    for (const std::string& name : list_dir(dir)) {
      if (name.rfind(prefix, 0) == 0 || name == temp_index_name(save_id)) ::unlink(join_path(dir, name).c_str());
    }
  } catch (const Error&) {
  }
}

}  // namespace

void checkpoint_save(Comm& comm, const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<std::shared_ptr<const Sharded>>& tensors, const SaveOptions& options,
                     const std::optional<Error>& local_error) {
  const std::string what = "checkpoint save into " + dir;
  // 1. Arguments and directory, agreed.
  std::vector<Item> items;
  std::optional<Error> err = local_error;
  if (!err) {
    err = capture([&] {
      items = prepare(comm, names, tensors);
      make_dirs(dir);
    });
  }
  agree(comm, err, what);

  // 2. A save id from rank 0.
  const std::string save_id = broadcast_string(comm, comm.rank() == 0 ? new_save_id() : std::string(), 0);

  // 3 + 4. Reduce PARTIAL tensors, write this rank's shards, agree.
  DataFile file(dir, data_file_name(save_id, comm.rank()), options.fsync, comm.rank());
  CheckpointIndex mine;
  mine.save_id = save_id;
  mine.nranks = comm.size();
  err = save_tensors(items, file, mine);
  try {
    agree(comm, err, what);
  } catch (...) {
    file.discard();
    throw;
  }

  // 5. Rank 0 merges, checks and commits; 6. everyone learns how that went.
  const std::vector<std::string> parts = gather_bytes(comm, encode_index(mine), 0);
  std::optional<Error> outcome;
  if (comm.rank() == 0) {
    CheckpointIndex index;
    bool committed = false;
    outcome = capture([&] {
      index = merge(parts, save_id, what);
      write_index(dir, index, options.fsync, &committed);
    });
    // Once the new index is in place its files stay, whatever failed after the rename.
    if (committed) {
      remove_unnamed(dir, index);
    } else if (outcome) {
      remove_save_files(dir, save_id);
    }
  }
  share_outcome(comm, outcome, 0, what);
}

}  // namespace weft::shard
