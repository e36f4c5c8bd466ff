// File-system steps of distributed checkpoints (core/sharding/checkpoint_*.cpp): descriptors
// that close themselves, positional reads and writes that finish or say why, fsync of files and
// directories, and the row-major block walk that bounds every buffer a checkpoint uses.
// Every error is a weft::Error whose message names the path and the system's reason.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/sharding/layout.h"

namespace weft::shard {

// Data files are named data-<save id>-r<rank>.bin, the index index.weft; a save writes the
// index first as index.weft.tmp-<save id> and renames it.
inline constexpr const char* kIndexFile = "index.weft";
std::string data_file_name(const std::string& save_id, int rank);
std::string temp_index_name(const std::string& save_id);
// True for names that a save made (data files and temporary indexes): only those are ever removed.
bool is_checkpoint_file_name(const std::string& name);
// A name an index may refer to: not empty, no '/', not "." or "..", at most 255 bytes.
bool is_plain_file_name(const std::string& name);
std::string join_path(const std::string& dir, const std::string& name);

class Fd {
 public:
  Fd() = default;
  Fd(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  const std::string& path() const { return path_; }
  // Writes all n bytes at `offset` (retrying short writes and EINTR).
  void write_at(const void* data, size_t n, uint64_t offset) const;
  // Reads up to n bytes at `offset`; returns fewer only at end of file.
  size_t read_at(void* data, size_t n, uint64_t offset) const;
  uint64_t size() const;
  void sync() const;
  // Closes now, reporting a failed close (NFS reports write errors there).
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

Fd open_read(const std::string& path);
// O_CREAT | O_EXCL: a save never overwrites a file it did not make itself.
Fd create_new(const std::string& path);
// mkdir -p.
void make_dirs(const std::string& dir);
// Makes renames and new names in `dir` durable.
void sync_dir(const std::string& dir);
void rename_file(const std::string& from, const std::string& to);
std::vector<std::string> list_dir(const std::string& dir);
// Reads a whole file of at most max_bytes into 8-byte-aligned storage; returns its size.
size_t read_whole(const std::string& path, size_t max_bytes, std::vector<uint64_t>& storage);

// Cuts a box of `shape` into blocks, each a run of consecutive elements of its row-major order:
// extent 1 on the dims before some dim s, a range on s, everything after s. step[k] is what one
// step along dim k costs (elements of the buffer the block spans: the row-major strides of
// `shape` itself, or of the shard a box is read from); each block costs at most max_cost unless
// one element of the innermost dim already does. f(offset, extent) is called in row-major
// order; nothing is called for an empty box; a 0-dim box is one block.
template <typename F>
void for_each_block(const Shape& shape, const Shape& step, int64_t max_cost, F&& f) {
  const int nd = static_cast<int>(shape.size());
  for (int k = 0; k < nd; ++k)
    if (shape[static_cast<size_t>(k)] == 0) return;
  if (nd == 0) {
    f(Shape{}, Shape{});
    return;
  }
  int s = 0;
  while (s < nd - 1 && step[static_cast<size_t>(s)] > max_cost) ++s;
  const auto us = static_cast<size_t>(s);
  const int64_t run = std::max<int64_t>(1, max_cost / std::max<int64_t>(1, step[us]));
  Shape offset(shape.size(), 0), extent = shape;
  for (int k = 0; k < s; ++k) extent[static_cast<size_t>(k)] = 1;
  for (;;) {
    for (int64_t j = 0; j < shape[us]; j += run) {
      offset[us] = j;
      extent[us] = std::min(run, shape[us] - j);
      f(offset, extent);
    }
    offset[us] = 0;
    int k = s - 1;  // odometer over the dims before s
    for (; k >= 0; --k) {
      if (++offset[static_cast<size_t>(k)] < shape[static_cast<size_t>(k)]) break;
      offset[static_cast<size_t>(k)] = 0;
    }
    if (k < 0) return;
  }
}

// Test seam (only where WEFT_TEST_SEAMS is defined: builds with WEFT_BUILD_TESTS; otherwise a
// no-op): with WEFT_TEST_CHECKPOINT_KILL="<rank>:<point>" the save's rank <rank> SIGKILLs itself
// at <point>: "data" = after the first block of its data file is written, "index" = rank 0
// after the temporary index is written, before the rename. tests/multiproc/test_checkpoint_kill
// proves a save killed there leaves the previous checkpoint intact. One getenv per point.
void test_kill_point(const char* point, int rank);

// Row-major strides (in elements) of a contiguous box of `shape`.
Shape row_major_strides(const Shape& shape);

}  // namespace weft::shard
