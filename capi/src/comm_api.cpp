// Communicator lifecycle and queries.
#include <netdb.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "capi/src/config.h"
#include "capi/src/handles.h"
#include "capi/src/shim.h"
#include "capi/src/store_registry.h"
#include "capi/src/validate.h"
#include "core/bootstrap/launch_env.h"
#include "core/bootstrap/socket_util.h"
#include "core/bootstrap/unique_id.h"
#include "core/comm/create.h"
#include "core/comm/shrink.h"
#include "core/common/log.h"
#include "core/common/version.h"
#include "core/plugin/env.h"

using namespace weft;
using namespace weft::capi;

static_assert(WEFT_VERSION_CODE == kVersionCode && WEFT_ABI_VERSION == kAbiVersion,
              "weft.h and core/common/version.h disagree on the version");
static_assert(WEFT_UNIQUE_ID_BYTES == bootstrap::kUniqueIdBytes, "unique id size");
static_assert(static_cast<int>(WEFT_IN_PROGRESS) == static_cast<int>(Status::in_progress), "status values");
static_assert(static_cast<int>(WEFT_UINT64) == static_cast<int>(DType::u64), "dtype values");
static_assert(static_cast<int>(WEFT_AVG) == static_cast<int>(ReduceOp::avg), "op values");

namespace {

// Address other ranks use to reach a store started here: WEFT_MASTER_ADDR, else this host's
// name when it resolves, else loopback (single-host jobs).
std::string advertised_host() {
  if (const char* a = std::getenv("WEFT_MASTER_ADDR"); a && *a) return a;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0]) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (getaddrinfo(host, nullptr, &hints, &res) == 0) {
      freeaddrinfo(res);
      if (std::strlen(host) < 64) return host;
    }
  }
  return "127.0.0.1";
}

// WEFT_UNIQUE_ID_PORT, else any free port. (Not WEFT_MASTER_PORT: under a launcher that
// port belongs to the job's store, and binding it would fail.)
uint16_t unique_id_port_from_env() {
  const char* p = std::getenv("WEFT_UNIQUE_ID_PORT");
  if (!p || !*p) return 0;
  char* end = nullptr;
  long v = std::strtol(p, &end, 10);
  if (*end || v < 1 || v > 65535) fail(Status::invalid_argument, "WEFT_UNIQUE_ID_PORT='%s'; expected 1..65535", p);
  return static_cast<uint16_t>(v);
}

void check_nranks(int rank, int nranks) {
  if (nranks < 1) fail(Status::invalid_argument, "nranks = %d; expected >= 1", nranks);
  check_rank(rank, nranks, "rank");
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_get_unique_id(weft_unique_id_t* id) {
  return guarded(__func__, [&] {
    check_out(id, "id");
    const char* bind = std::getenv("WEFT_MASTER_ADDR");
    bootstrap::UniqueId uid;
    uid.secret = bootstrap::random_secret().substr(0, 32);
    auto server = start_store(bind && *bind ? bind : "0.0.0.0", unique_id_port_from_env(), uid.secret);
    uid.host = advertised_host();
    uid.port = server->port();
    std::memset(id->internal, 0, sizeof(id->internal));
    bootstrap::encode_unique_id(uid, id->internal);
  });
}

WEFT_API weft_status_t weft_comm_init(weft_comm_t* comm, const weft_unique_id_t* id, int rank, int nranks,
                                      const weft_comm_config_t* config) {
  return guarded(__func__, [&] {
    check_out(comm, "comm");
    *comm = nullptr;
    plugin::load_env_plugins();  // WEFT_PLUGINS (weft/plugin.h), once per process
    check_out(id, "id");
    check_nranks(rank, nranks);
    bootstrap::UniqueId uid = bootstrap::decode_unique_id(id->internal);
    CommConfig cfg = resolve_config(config, nullptr);
    WorldSetup setup;
    setup.store_host = uid.host;
    setup.store_port = uid.port;
    setup.secret = uid.secret;
    setup.rank = rank;
    setup.size = nranks;
    setup.store_server = find_store(uid.port);
    setup.timeout = cfg.timeout;
    setup.name = cfg.name;
    *comm = register_comm(create_root_comm(setup, std::move(cfg)));
  });
}

WEFT_API weft_status_t weft_comm_init_from_env(weft_comm_t* comm, const weft_comm_config_t* config) {
  return guarded(__func__, [&] {
    check_out(comm, "comm");
    *comm = nullptr;
    plugin::load_env_plugins();  // WEFT_PLUGINS (weft/plugin.h), once per process
    bootstrap::LaunchEnv env = bootstrap::read_launch_env();
    CommConfig cfg = resolve_config(config, nullptr);
    WorldSetup setup;
    setup.store_host = env.master_addr;
    setup.store_port = env.master_port;
    setup.secret = env.secret;
    setup.rank = env.rank;
    setup.size = env.world_size;
    setup.timeout = cfg.timeout;
    setup.name = cfg.name;
    setup.store_server = find_store(env.master_port);
    if (!setup.store_server && env.rank == 0 && !env.store_hosted) {
      // A loopback master address keeps the store on loopback (socket_util.h says why not more).
      const std::string bind = bootstrap::store_bind_address(env.master_addr);
      setup.store_server = start_store(bind, env.master_port, env.secret);
      if (const std::string warning = bootstrap::open_store_warning(env, bind); !warning.empty()) {
        static std::once_flag once;
        std::call_once(once, [&] { log(LogLevel::info, "%s", warning.c_str()); });
      }
      find_store(env.master_port);  // hand ownership to the communicator
    }
    *comm = register_comm(create_root_comm(setup, std::move(cfg)));
  });
}

WEFT_API weft_status_t weft_comm_split(weft_comm_t comm, int color, int key, weft_comm_t* newcomm,
                                       const weft_comm_config_t* config) {
  return guarded(__func__, [&] {
    check_out(newcomm, "newcomm");
    *newcomm = nullptr;
    plugin::load_env_plugins();
    Comm& parent = *lookup_comm(comm, "comm")->comm;
    parent.throw_if_unusable();
    CommConfig cfg = resolve_config(config, &parent.config());
    std::shared_ptr<Comm> child;
    parent.executor().run_blocking([&] { child = split_comm(parent, color, key, std::move(cfg)); });
    if (child) *newcomm = register_comm(std::move(child));
  });
}

WEFT_API weft_status_t weft_comm_dup(weft_comm_t comm, weft_comm_t* newcomm) {
  return guarded(__func__, [&] {
    check_out(newcomm, "newcomm");
    *newcomm = nullptr;
    plugin::load_env_plugins();
    Comm& parent = *lookup_comm(comm, "comm")->comm;
    parent.throw_if_unusable();
    CommConfig cfg = resolve_config(nullptr, &parent.config());
    std::shared_ptr<Comm> child;
    parent.executor().run_blocking([&] { child = split_comm(parent, 0, parent.rank(), std::move(cfg)); });
    *newcomm = register_comm(std::move(child));
  });
}

WEFT_API weft_status_t weft_comm_shrink(weft_comm_t comm, weft_comm_t* newcomm) {
  return guarded(__func__, [&] {
    check_out(newcomm, "newcomm");
    *newcomm = nullptr;
    plugin::load_env_plugins();
    Comm& old = *lookup_comm(comm, "comm")->comm;
    // No throw_if_unusable(): a broken (or aborted) communicator is what shrink is for.
    CommConfig cfg = resolve_config(nullptr, &old.config());
    std::shared_ptr<Comm> child;
    old.executor().run_blocking([&] { child = shrink_comm(old, std::move(cfg)); });
    *newcomm = register_comm(std::move(child));
  });
}

WEFT_API weft_status_t weft_comm_rank(weft_comm_t comm, int* rank) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    check_out(rank, "rank");
    *rank = h->comm->rank();
  });
}

WEFT_API weft_status_t weft_comm_size(weft_comm_t comm, int* size) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    check_out(size, "size");
    *size = h->comm->size();
  });
}

WEFT_API weft_status_t weft_comm_local_rank(weft_comm_t comm, int* local_rank) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    check_out(local_rank, "local_rank");
    *local_rank = h->comm->local_rank();
  });
}

WEFT_API weft_status_t weft_comm_local_size(weft_comm_t comm, int* local_size) {
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    check_out(local_size, "local_size");
    *local_size = h->comm->local_size();
  });
}

WEFT_API weft_status_t weft_comm_abort(weft_comm_t comm) {
  return guarded(__func__, [&] {
    // Own a reference: the call this abort ends returns as soon as the flag is set, and its thread
    // may destroy the handle and the communicator while abort() still runs (a device abort takes
    // long); TSan saw that use after free (tests/sanitizers/tsan_threads.cpp).
    std::shared_ptr<Comm> c = lookup_comm(comm, "comm")->comm;
    c->abort();
  });
}

WEFT_API weft_status_t weft_comm_destroy(weft_comm_t comm) {
  if (!comm) return WEFT_OK;
  return guarded(__func__, [&] {
    weft_comm* h = lookup_comm(comm, "comm");
    if (h->owned_by_mesh) {
      fail(Status::invalid_argument,
           "comm belongs to a mesh (from weft_mesh_comm); weft_mesh_destroy frees it, not weft_comm_destroy");
    }
    // Queued collectives finish (each within its deadline) before the handle goes away;
    // requests still held by the user keep the communicator's state alive.
    h->comm->executor().shutdown();
    unregister_comm(comm);
  });
}

}  // extern "C"
