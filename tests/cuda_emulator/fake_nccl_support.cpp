// The stand-in NCCL's plumbing: see fake_nccl_support.h.
#include "tests/cuda_emulator/fake_nccl_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace weft::fake_nccl {

// ------------------------------------------------------------------ last error and logging

namespace {
std::mutex g_error_mutex;
}  // namespace

char g_last_error[1024] = "";

ncclResult_t fail(ncclResult_t r, const char* fmt, ...) {
  char text[sizeof g_last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    std::memcpy(g_last_error, text, sizeof text);
  }
  // Like NCCL_DEBUG=WARN, on request only.
  if (const char* d = std::getenv("NCCL_DEBUG"); d && *d) {
    std::fprintf(stderr, "[pid %d] fake NCCL WARN %s\n", static_cast<int>(getpid()), text);
  }
  return r;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strcmp(v, "0") != 0;
}

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// ------------------------------------------------------------------ waiting

void sleep_us(long us) {
  struct timespec ts{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

// ------------------------------------------------------------------ files

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes) {
    ssize_t w = write(fd, p, bytes);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    bytes -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t bytes, off_t at) {
  char* p = static_cast<char*>(data);
  while (bytes) {
    ssize_t r = pread(fd, p, bytes, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    at += r;
    bytes -= static_cast<size_t>(r);
  }
  return true;
}

bool publish(const std::string& dir, const std::string& name, const void* head, size_t head_bytes, const void* body,
             size_t body_bytes, bool exclusive) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = dir + "/.tmp." + name + "." + std::to_string(getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  int fd = open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = write_all(fd, head, head_bytes) && write_all(fd, body, body_bytes);
  ok = close(fd) == 0 && ok;
  const std::string final_path = dir + "/" + name;
  if (ok) ok = exclusive ? link(tmp.c_str(), final_path.c_str()) == 0 : rename(tmp.c_str(), final_path.c_str()) == 0;
  const int saved = errno;
  unlink(tmp.c_str());  // after link(), or after a failure; a no-op after rename()
  errno = saved;
  return ok;
}

void remove_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (struct dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) unlink((dir + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

}  // namespace weft::fake_nccl
