#include "mp_common.h"

#include <cctype>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace mpt {
namespace {
char g_prefix[48] = "[rank ?] ";

void vlog(FILE* f, const char* tag, const char* fmt, va_list ap) {
  char body[4096];
  std::vsnprintf(body, sizeof body, fmt, ap);
  std::fprintf(f, "%s%s%s\n", g_prefix, tag, body);
  std::fflush(f);
}
}  // namespace

int64_t default_timeout_ms() {
  const char* v = std::getenv("WEFT_TEST_TIMEOUT_MS");
  if (v && *v) return std::atoll(v);
  return 120000;
}

void set_log_rank(int rank, int size) { std::snprintf(g_prefix, sizeof g_prefix, "[rank %d/%d] ", rank, size); }

void logf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(stdout, "", fmt, ap);
  va_end(ap);
}

void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fflush(stdout);
  vlog(stderr, "FATAL: ", fmt, ap);
  va_end(ap);
  std::_Exit(1);
}

World init_world(int64_t timeout_ms, int check_collectives) {
  World w;
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = timeout_ms;
  cfg.check_collectives = check_collectives;
  cfg.name = "mptest-world";
  if (const char* r = std::getenv("WEFT_RANK")) {
    const char* n = std::getenv("WEFT_WORLD_SIZE");
    set_log_rank(std::atoi(r), n ? std::atoi(n) : -1);
  }
  weft_status_t s = weft_comm_init_from_env(&w.comm, &cfg);
  if (s != WEFT_OK) die("weft_comm_init_from_env: %s: %s", status_name(s), last_error().c_str());
  MPT_OK(weft_comm_rank(w.comm, &w.rank));
  MPT_OK(weft_comm_size(w.comm, &w.size));
  set_log_rank(w.rank, w.size);
  return w;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

const char* status_name(weft_status_t s) {
  switch (s) {
    case WEFT_OK: return "WEFT_OK";
    case WEFT_ERR_INVALID_ARGUMENT: return "WEFT_ERR_INVALID_ARGUMENT";
    case WEFT_ERR_UNSUPPORTED: return "WEFT_ERR_UNSUPPORTED";
    case WEFT_ERR_OUT_OF_MEMORY: return "WEFT_ERR_OUT_OF_MEMORY";
    case WEFT_ERR_TIMEOUT: return "WEFT_ERR_TIMEOUT";
    case WEFT_ERR_REMOTE: return "WEFT_ERR_REMOTE";
    case WEFT_ERR_ABORTED: return "WEFT_ERR_ABORTED";
    case WEFT_ERR_MISMATCH: return "WEFT_ERR_MISMATCH";
    case WEFT_ERR_TRANSPORT: return "WEFT_ERR_TRANSPORT";
    case WEFT_ERR_INTERNAL: return "WEFT_ERR_INTERNAL";
    case WEFT_IN_PROGRESS: return "WEFT_IN_PROGRESS";
  }
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "status(%d)", static_cast<int>(s));
  return buf;
}

std::string last_error() {
  const char* e = weft_last_error();
  return e ? std::string(e) : std::string("(weft_last_error() returned NULL)");
}

bool contains_ci(const std::string& hay, const std::string& needle) {
  if (needle.empty()) return true;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    size_t k = 0;
    while (k < needle.size() &&
           std::tolower(static_cast<unsigned char>(hay[i + k])) == std::tolower(static_cast<unsigned char>(needle[k])))
      ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

bool mentions_rank(const std::string& msg, int r) {
  std::string low;
  for (char c : msg) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* kw : {"rank", "peer"}) {
    for (size_t pos = low.find(kw); pos != std::string::npos; pos = low.find(kw, pos + 1)) {
      size_t i = pos + 4;
      size_t end = std::min(low.size(), i + 24);
      while (i < end) {
        if (std::isdigit(static_cast<unsigned char>(low[i]))) {
          size_t j = i;
          while (j < low.size() && std::isdigit(static_cast<unsigned char>(low[j]))) ++j;
          if (std::atoi(low.substr(i, j - i).c_str()) == r) return true;
          i = j;
        } else if (std::isalpha(static_cast<unsigned char>(low[i])) && low[i] != 's') {
          break;  // the next word: stop looking ("rank 3 of 4": 4 is not a rank)
        } else {
          ++i;
        }
      }
    }
  }
  return false;
}

std::string env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : std::string(dflt);
}

std::string unique_id_for_children() {
  unsetenv("WEFT_MASTER_PORT");
  weft_unique_id_t id;
  if (weft_get_unique_id(&id) != WEFT_OK) return "";
  std::string hex;
  for (size_t i = 0; i < sizeof id.internal; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(id.internal[i]));
    hex += b;
  }
  for (const char* v : {"WEFT_RANK", "WEFT_WORLD_SIZE", "RANK", "WORLD_SIZE"}) unsetenv(v);
  return hex;
}

weft_unique_id_t unique_id_from_hex(const std::string& hex) {
  weft_unique_id_t id;
  if (hex.size() != 2 * sizeof id.internal) die("unique id: expected %zu hex digits, got %zu", 2 * sizeof id.internal, hex.size());
  for (size_t i = 0; i < sizeof id.internal; ++i) {
    const std::string digits = hex.substr(2 * i, 2);
    char* end = nullptr;
    id.internal[i] = static_cast<char>(std::strtoul(digits.c_str(), &end, 16));
    if (end != digits.c_str() + 2) die("unique id: '%s' at %zu is not a hex byte", digits.c_str(), 2 * i);
  }
  return id;
}

}  // namespace mpt
