#include "capi/src/store_registry.h"

#include <map>
#include <mutex>

namespace weft::capi {
namespace {

struct Entry {
  std::shared_ptr<bootstrap::StoreServer> pending;  // started, no communicator holds it yet
  std::weak_ptr<bootstrap::StoreServer> active;
};

std::mutex& mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<uint16_t, Entry>& entries() {
  static auto* e = new std::map<uint16_t, Entry>();
  return *e;
}

}  // namespace

std::shared_ptr<bootstrap::StoreServer> start_store(const std::string& bind_addr, uint16_t port,
                                                    const std::string& secret) {
  auto server = std::make_shared<bootstrap::StoreServer>(bind_addr, port, secret);
  std::lock_guard<std::mutex> lock(mutex());
  Entry& e = entries()[server->port()];
  e.pending = server;
  e.active = server;
  return server;
}

std::shared_ptr<bootstrap::StoreServer> find_store(uint16_t port) {
  std::lock_guard<std::mutex> lock(mutex());
  auto it = entries().find(port);
  if (it == entries().end()) return nullptr;
  std::shared_ptr<bootstrap::StoreServer> s = it->second.active.lock();
  // From now on the communicators own it: it stops when the last of them is destroyed.
  it->second.pending.reset();
  if (!s) entries().erase(it);
  return s;
}

}  // namespace weft::capi
