// Launcher detection for weft_comm_init_from_env. The first launcher whose rank or size
// variable is present wins, and then both must be present and valid: a half-set launcher is
// an error, never a silent fall-through to the next one.
#include "core/bootstrap/launch_env.h"

#include <cstdlib>
#include <limits>

#include "core/bootstrap/store_wire.h"
#include "core/common/status.h"

namespace weft::bootstrap {
namespace {

struct Launcher {
  const char* source;
  const char* rank_var;
  const char* size_var;
  const char* local_rank_var;  // nullptr: this launcher has none
};

constexpr Launcher kLaunchers[] = {
    {"weft", "WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"pmi", "PMI_RANK", "PMI_SIZE", nullptr},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

using Getenv = std::function<const char*(const char*)>;

// Whole-string decimal integer (optional sign, digits only, no spaces), within [lo, hi].
bool parse_int(const char* s, long long lo, long long hi, long long* out) {
  if (!s || !*s) return false;
  const char* p = s;
  bool neg = false;
  if (*p == '+' || *p == '-') {
    neg = *p == '-';
    ++p;
  }
  if (!*p) return false;
  long long v = 0;
  for (; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    if (v > (std::numeric_limits<long long>::max() - 9) / 10) return false;  // far out of any range here
    v = v * 10 + (*p - '0');
  }
  if (neg) v = -v;
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

int require_int(const Getenv& env, const char* var, long long lo, long long hi, const char* expected) {
  const char* value = env(var);
  if (!value) fail(Status::invalid_argument, "%s is not set: expected %s", var, expected);
  long long v = 0;
  if (!parse_int(value, lo, hi, &v)) {
    fail(Status::invalid_argument, "%s='%s' is not valid: expected %s", var, value, expected);
  }
  return static_cast<int>(v);
}

// First of the two variables that is set, or nullptr; *name says which.
const char* first_of(const Getenv& env, const char* a, const char* b, const char** name) {
  if (const char* v = env(a)) {
    *name = a;
    return v;
  }
  *name = b;
  return env(b);
}

// FNV-1a, 64 bit: stable across builds and platforms.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

LaunchEnv read_launch_env() {
  return read_launch_env([](const char* name) -> const char* { return std::getenv(name); });
}

LaunchEnv read_launch_env(const std::function<const char*(const char*)>& getenv_fn) {
  const Getenv& env = getenv_fn;
  LaunchEnv out;

  const Launcher* found = nullptr;
  for (const Launcher& l : kLaunchers) {
    if (env(l.rank_var) || env(l.size_var)) {
      found = &l;
      break;
    }
  }
  if (!found) {
    fail(Status::invalid_argument,
         "no launcher found in the environment: set WEFT_RANK and WEFT_WORLD_SIZE, or launch with torchrun "
         "(RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), PMI (PMI_RANK, PMI_SIZE) "
         "or Slurm (SLURM_PROCID, SLURM_NTASKS)");
  }
  out.source = found->source;
  for (auto [missing, present] : {std::pair{found->size_var, found->rank_var}, std::pair{found->rank_var, found->size_var}}) {
    if (!env(missing)) {
      fail(Status::invalid_argument, "%s is not set but %s is: a %s launch must set both", missing, present,
           found->source);
    }
  }
  out.world_size = require_int(env, found->size_var, 1, std::numeric_limits<int>::max(),
                               "a world size: an integer >= 1");
  std::string rank_expect = format("a rank: an integer in 0..%d (%s=%d)", out.world_size - 1, found->size_var,
                                   out.world_size);
  out.rank = require_int(env, found->rank_var, 0, out.world_size - 1, rank_expect.c_str());
  if (found->local_rank_var && env(found->local_rank_var)) {
    std::string local_expect = format("a local rank: an integer in 0..%d (%s=%d)", out.world_size - 1,
                                      found->size_var, out.world_size);
    out.local_rank = require_int(env, found->local_rank_var, 0, out.world_size - 1, local_expect.c_str());
  }

  // The store address: weft's variables first, then torchrun's. Open MPI, PMI and Slurm do not
  // say where rank 0 is, so those launches must set one of the pairs as well.
  const char* addr_var = nullptr;
  const char* addr = first_of(env, "WEFT_MASTER_ADDR", "MASTER_ADDR", &addr_var);
  if (!addr) {
    fail(Status::invalid_argument,
         "WEFT_MASTER_ADDR (or MASTER_ADDR) is not set: expected the host name or IPv4 address of the rendezvous "
         "store (rank 0, or weftrun with WEFT_STORE_HOSTED=1); launches through Open MPI, PMI or Slurm must set "
         "it too (launcher detected: %s)",
         out.source.c_str());
  }
  if (!*addr) fail(Status::invalid_argument, "%s is empty: expected a host name or IPv4 address", addr_var);
  out.master_addr = addr;
  const char* port_var = nullptr;
  const char* port = first_of(env, "WEFT_MASTER_PORT", "MASTER_PORT", &port_var);
  if (!port) {
    fail(Status::invalid_argument,
         "WEFT_MASTER_PORT (or MASTER_PORT) is not set: expected the TCP port of the rendezvous store, 1..65535 "
         "(launcher detected: %s)",
         out.source.c_str());
  }
  out.master_port = static_cast<uint16_t>(require_int(env, port_var, 1, 65535, "a TCP port: an integer in 1..65535"));

  if (const char* secret = env("WEFT_JOB_SECRET"); secret && *secret) {
    out.secret = secret;
    if (out.secret.size() > wire::kMaxSecret) {
      fail(Status::invalid_argument, "WEFT_JOB_SECRET is %zu bytes long: expected at most %u bytes",
           out.secret.size(), wire::kMaxSecret);
    }
  } else {
    // Weak default: every rank of one job derives the same value from what they already share.
    // It is NOT a security measure (anyone who can read the job's address can compute it); it only
    // keeps two jobs that reuse a host:port, or a stale process from an earlier job with another
    // world size, from joining each other's rendezvous by accident. Set WEFT_JOB_SECRET (weftrun
    // does) to keep strangers out.
    std::string basis = format("%s:%u:%d", out.master_addr.c_str(), static_cast<unsigned>(out.master_port),
                               out.world_size);
    out.secret = format("weft-weak-%016llx", static_cast<unsigned long long>(fnv1a(basis)));
    out.weak_secret = true;
  }

  if (const char* hosted = env("WEFT_STORE_HOSTED")) {
    std::string h = hosted;
    if (h == "1") {
      out.store_hosted = true;
    } else if (h == "0" || h.empty()) {
      out.store_hosted = false;
    } else {
      fail(Status::invalid_argument, "WEFT_STORE_HOSTED='%s' is not valid: expected 1 (the launcher runs the "
           "store) or 0 (rank 0 runs it)", hosted);
    }
  }
  return out;
}

std::string open_store_warning(const LaunchEnv& env, const std::string& bind_addr) {
  if (!env.weak_secret || bind_addr.rfind("127.", 0) == 0) return "";
  return format("the rendezvous store listens on port %u of every interface and WEFT_JOB_SECRET is not set (launcher: "
                "%s): its secret is derived from the job's address, so anyone who can reach the port can join this "
                "job; set WEFT_JOB_SECRET to the same random value on every rank (weftrun does)",
                static_cast<unsigned>(env.master_port), env.source.c_str());
}

}  // namespace weft::bootstrap
