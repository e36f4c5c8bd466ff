#include "core/sharding/checkpoint_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/common/status.h"

namespace weft::shard {
namespace {

// One system call moves at most this much: Linux caps a read/write at ~2 GiB anyway.
constexpr size_t kMaxIo = size_t{1} << 30;

[[noreturn]] void io_fail(const char* what, const std::string& path, int err) {
  fail(Status::invalid_argument, "cannot %s %s: %s", what, path.c_str(), std::strerror(err));
}

bool all_hex(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string data_file_name(const std::string& save_id, int rank) {
  return "data-" + save_id + "-r" + std::to_string(rank) + ".bin";
}

std::string temp_index_name(const std::string& save_id) { return std::string(kIndexFile) + ".tmp-" + save_id; }

bool is_checkpoint_file_name(const std::string& name) {
  const std::string tmp = std::string(kIndexFile) + ".tmp-";
  if (name.rfind(tmp, 0) == 0) return all_hex(name.substr(tmp.size()));
  // data-<hex>-r<digits>.bin
  if (name.rfind("data-", 0) != 0 || name.size() < 12 || name.compare(name.size() - 4, 4, ".bin") != 0) return false;
  const std::string mid = name.substr(5, name.size() - 9);  // <hex>-r<digits>
  const size_t r = mid.rfind("-r");
  if (r == std::string::npos || !all_hex(mid.substr(0, r))) return false;
  const std::string digits = mid.substr(r + 2);
  if (digits.empty()) return false;
  for (char c : digits)
    if (c < '0' || c > '9') return false;
  return true;
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

void Fd::write_at(const void* data, size_t n, uint64_t offset) const {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, std::min(n, kMaxIo), static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      io_fail("write", path_, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

size_t Fd::read_at(void* data, size_t n, uint64_t offset) const {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, std::min(n - done, kMaxIo), static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      io_fail("read", path_, errno);
    }
    if (r == 0) break;  // end of file
    done += static_cast<size_t>(r);
  }
  return done;
}

uint64_t Fd::size() const {
  struct stat st{};
  if (::fstat(fd_, &st) != 0) io_fail("stat", path_, errno);
  return static_cast<uint64_t>(st.st_size);
}

void Fd::sync() const {
  if (::fsync(fd_) != 0) io_fail("fsync", path_, errno);
}

void Fd::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) io_fail("close", path_, errno);
}

Fd open_read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_fail("open", path, errno);
  return Fd(fd, path);
}

Fd create_new(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_fail("create", path, errno);
  return Fd(fd, path);
}

void make_dirs(const std::string& dir) {
  if (dir.empty()) fail(Status::invalid_argument, "dir is empty; expected a directory path");
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) io_fail("create directory", prefix, errno);
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) io_fail("stat", dir, errno);
  if (!S_ISDIR(st.st_mode)) fail(Status::invalid_argument, "%s exists and is not a directory", dir.c_str());
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_fail("open directory", dir, errno);
  Fd d(fd, dir);
  d.sync();
}

void rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    fail(Status::invalid_argument, "cannot rename %s to %s: %s", from.c_str(), to.c_str(), std::strerror(errno));
  }
}

std::vector<std::string> list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) io_fail("list", dir, errno);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

size_t read_whole(const std::string& path, size_t max_bytes, std::vector<uint64_t>& storage) {
  Fd f = open_read(path);
  const uint64_t size = f.size();
  if (size > max_bytes) {
    fail(Status::invalid_argument, "%s is %llu bytes; the limit is %zu", path.c_str(),
         static_cast<unsigned long long>(size), max_bytes);
  }
  storage.assign(static_cast<size_t>(size) / 8 + 1, 0);
  const size_t got = f.read_at(storage.data(), static_cast<size_t>(size), 0);
  if (got != size) fail(Status::invalid_argument, "%s changed size while it was read", path.c_str());
  return got;
}

void test_kill_point(const char* point, int rank) {
#if defined(WEFT_TEST_SEAMS)
  const char* v = std::getenv("WEFT_TEST_CHECKPOINT_KILL");
  if (!v || !*v) return;
  const std::string want = std::to_string(rank) + ":" + point;
  if (want == v) ::raise(SIGKILL);
#else
  (void)point;
  (void)rank;
#endif
}

Shape row_major_strides(const Shape& shape) {
  Shape st(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) st[k - 1] = st[k] * shape[k];
  return st;
}

}  // namespace weft::shard
