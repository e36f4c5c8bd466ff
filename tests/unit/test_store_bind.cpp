// Where a rank-0-hosted store listens (core/bootstrap/socket_util.h, store_bind_address): a
// loopback master address keeps it on loopback, so a job on one machine is not reachable from the
// network; any other address keeps "all interfaces" (other hosts must reach it). The reachability
// check connects through this machine's own non-loopback address, and proves it can fail by
// reaching a store bound to all interfaces the same way.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "core/bootstrap/socket_util.h"
#include "core/bootstrap/store.h"

using weft::bootstrap::store_bind_address;
using weft::bootstrap::StoreServer;

namespace {

// This machine's first IPv4 address that is not loopback ("" when it has none).
std::string outside_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text)) found = text;
  }
  freeifaddrs(list);
  return found;
}

// Whether a TCP connection to address:port is accepted.
bool reachable(const std::string& address, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, address.c_str(), &to.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

TEST(StoreBind, LoopbackMasterAddressesBindLoopback) {
  EXPECT_EQ(store_bind_address("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(store_bind_address("127.0.1.1"), "127.0.0.1");
  EXPECT_EQ(store_bind_address("localhost"), "127.0.0.1");
  EXPECT_EQ(store_bind_address(""), "127.0.0.1");  // weft's default master address is loopback
}

TEST(StoreBind, OtherAddressesBindAllInterfaces) {
  EXPECT_EQ(store_bind_address("10.11.12.13"), "0.0.0.0");
  EXPECT_EQ(store_bind_address("192.168.0.1"), "0.0.0.0");
  // This machine's own name, even where it resolves to 127.0.1.1 here: other hosts resolve it to
  // the real address.
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  EXPECT_EQ(store_bind_address(name), "0.0.0.0") << name;
}

TEST(StoreBind, ALoopbackStoreIsNotReachableFromOutside) {
  const std::string outside = outside_address();
  if (outside.empty()) GTEST_SKIP() << "this machine has no non-loopback IPv4 address";
  StoreServer loopback(store_bind_address("127.0.0.1"), 0, "secret");
  EXPECT_TRUE(reachable("127.0.0.1", loopback.port()));
  EXPECT_FALSE(reachable(outside, loopback.port())) << "a store for master 127.0.0.1 answers on " << outside;
  // The check can fail: a store on all interfaces answers on the same address.
  StoreServer everywhere(store_bind_address("10.11.12.13"), 0, "secret");
  EXPECT_TRUE(reachable(outside, everywhere.port())) << outside;
}
