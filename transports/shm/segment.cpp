#include "transports/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "core/common/status.h"

namespace weft::shm {
namespace {

constexpr uint64_t kMagic = 0x31686d7374666577ull;  // "weftshm1"

struct Header {
  uint64_t magic;
  uint64_t nranks;
  uint64_t slot_bytes;
};

}  // namespace

size_t Segment::layout_bytes(int nranks, size_t slot_bytes, size_t* data_offset) {
  size_t control = kHeaderBytes + kLine * static_cast<size_t>(nranks);
  *data_offset = (control + 4095) & ~size_t{4095};
  return *data_offset + 2 * static_cast<size_t>(nranks) * slot_bytes;
}

Segment::Segment(std::string name, char* base, size_t bytes, int nranks, size_t slot_bytes, bool owner)
    : name_(std::move(name)), base_(base), bytes_(bytes), nranks_(nranks), slot_bytes_(slot_bytes), linked_(owner) {
  layout_bytes(nranks, slot_bytes, &data_offset_);
}

std::unique_ptr<Segment> Segment::create(const std::string& name, int nranks, size_t slot_bytes) {
  size_t data_offset = 0;
  size_t bytes = layout_bytes(nranks, slot_bytes, &data_offset);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail(Status::transport, "shm_open(%s) to create failed: %s", name.c_str(), std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    fail(Status::out_of_memory, "cannot size shared memory %s to %zu bytes: %s", name.c_str(), bytes, std::strerror(e));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    fail(Status::out_of_memory, "cannot map %zu bytes of shared memory %s: %s", bytes, name.c_str(), std::strerror(e));
  }
  auto* h = static_cast<Header*>(p);
  h->nranks = static_cast<uint64_t>(nranks);
  h->slot_bytes = slot_bytes;
  for (int r = 0; r < nranks; ++r) {
    new (static_cast<char*>(p) + kHeaderBytes + kLine * static_cast<size_t>(r)) std::atomic<uint64_t>(0);
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return std::unique_ptr<Segment>(new Segment(name, static_cast<char*>(p), bytes, nranks, slot_bytes, true));
}

std::unique_ptr<Segment> Segment::open(const std::string& name, int nranks, size_t slot_bytes) {
  size_t data_offset = 0;
  size_t bytes = layout_bytes(nranks, slot_bytes, &data_offset);
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail(Status::transport, "shm_open(%s) failed: %s", name.c_str(), std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    fail(Status::mismatch, "shared memory %s has %lld bytes; expected %zu", name.c_str(),
         static_cast<long long>(st.st_size), bytes);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) fail(Status::out_of_memory, "cannot map shared memory %s: %s", name.c_str(), std::strerror(e));
  auto* h = static_cast<Header*>(p);
  if (h->magic != kMagic || h->nranks != static_cast<uint64_t>(nranks) || h->slot_bytes != slot_bytes) {
    munmap(p, bytes);
    fail(Status::mismatch, "shared memory %s does not hold a weft segment for %d ranks", name.c_str(), nranks);
  }
  return std::unique_ptr<Segment>(new Segment(name, static_cast<char*>(p), bytes, nranks, slot_bytes, false));
}

void Segment::unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

Segment::~Segment() {
  unlink();
  munmap(base_, bytes_);
}

}  // namespace weft::shm
