// A POSIX shared-memory segment shared by the ranks of one communicator on one host: one
// arrival counter per rank (each on its own cache line) and two sets of per-rank slots, so a
// collective can alternate sets between rounds and reuse a set two rounds later without
// waiting. The segment's name is unlinked as soon as every rank has mapped it, so nothing is
// left in /dev/shm when a process dies.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace weft::shm {

class Segment {
 public:
  // Creates a fresh segment (fails if the name exists) for `nranks` ranks.
  static std::unique_ptr<Segment> create(const std::string& name, int nranks, size_t slot_bytes);
  // Maps a segment another rank created; checks its header against nranks/slot_bytes.
  static std::unique_ptr<Segment> open(const std::string& name, int nranks, size_t slot_bytes);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Removes the name (mappings stay valid). Called by the creator once all ranks mapped it.
  void unlink();

  std::atomic<uint64_t>& arrival(int rank) { return *reinterpret_cast<std::atomic<uint64_t>*>(base_ + kHeaderBytes + kLine * static_cast<size_t>(rank)); }
  char* slot(int set, int rank) {
    return base_ + data_offset_ + (static_cast<size_t>(set) * static_cast<size_t>(nranks_) + static_cast<size_t>(rank)) * slot_bytes_;
  }
  size_t slot_bytes() const { return slot_bytes_; }
  int nranks() const { return nranks_; }
  const std::string& name() const { return name_; }

 private:
  static constexpr size_t kLine = 64;
  static constexpr size_t kHeaderBytes = 64;  // magic, nranks, slot size
  Segment(std::string name, char* base, size_t bytes, int nranks, size_t slot_bytes, bool owner);
  static size_t layout_bytes(int nranks, size_t slot_bytes, size_t* data_offset);

  std::string name_;
  char* base_;
  size_t bytes_;
  int nranks_;
  size_t slot_bytes_;
  size_t data_offset_ = 0;
  bool linked_;
};

}  // namespace weft::shm
