// The rendezvous store: correctness across clients and threads, blocking semantics, deadlines,
// authentication, and robustness against malformed peers (raw sockets).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/bootstrap/store.h"
#include "core/common/status.h"
#include "raw_store_conn.h"

using namespace std::chrono_literals;
using weft::Error;
using weft::Status;
using weft::bootstrap::StoreClient;
using weft::bootstrap::StoreServer;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kSecret = "test-secret-0123";

std::unique_ptr<StoreClient> client_for(const StoreServer& s, const std::string& secret = kSecret) {
  return std::make_unique<StoreClient>("127.0.0.1", s.port(), secret, 5000ms);
}

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Runs fn, expects weft::Error with `status`, returns the message.
std::string expect_error(Status status, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "expected weft::Error " << weft::status_name(status);
  return std::string();
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

uint16_t unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

using store_test::le32;
using store_test::le64;

std::string hello(const std::string& secret = kSecret) { return store_test::hello(secret); }

// A raw connection that must reach the server (every protocol-error case starts connected).
class RawConn : public store_test::RawStoreConn {
 public:
  explicit RawConn(uint16_t port) : RawStoreConn(port) { EXPECT_TRUE(connected()) << std::strerror(errno); }
};

}  // namespace

TEST(Store, SetGetAddWait) {
  StoreServer server("127.0.0.1", 0, kSecret);
  ASSERT_NE(server.port(), 0);
  auto a = client_for(server);
  auto b = client_for(server);
  a->set("alpha", "one");
  EXPECT_EQ(b->get("alpha", 1000ms), "one");
  a->set("alpha", "uno");  // overwrite
  EXPECT_EQ(b->get("alpha", 1000ms), "uno");
  std::string binary("\0\x01\xff\n", 4);
  b->set("bin", binary);
  EXPECT_EQ(a->get("bin", 1000ms), binary);
  a->set("empty", "");
  EXPECT_EQ(b->get("empty", 1000ms), "");
  EXPECT_EQ(a->add("ctr", 5), 5);
  EXPECT_EQ(b->add("ctr", -2), 3);
  EXPECT_EQ(a->add("ctr", 0), 3);
  EXPECT_EQ(b->get("ctr", 1000ms), "3");
  a->wait({"alpha", "bin", "ctr"}, 1000ms);
  a->wait({}, 1000ms);
  std::string msg = expect_error(Status::invalid_argument, [&] { a->add("alpha", 1); });
  EXPECT_NE(msg.find("alpha"), std::string::npos) << msg;
  // The connection stays usable after an error reply.
  EXPECT_EQ(a->get("alpha", 1000ms), "uno");
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i);
  a->set("big", big);
  EXPECT_EQ(b->get("big", 1000ms), big);
  EXPECT_EQ(server.rejected_connections(), 0u);
}

TEST(Store, HostNameResolves) {
  StoreServer server("localhost", 0, kSecret);
  StoreClient c("localhost", server.port(), kSecret, 2000ms);
  c.set("k", "v");
  EXPECT_EQ(c.get("k", 100ms), "v");
}

TEST(Store, ManyClientsAndThreads) {
  StoreServer server("", 0, kSecret);
  constexpr int kThreads = 8, kAdds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto c = client_for(server);
        for (int i = 0; i < kAdds; ++i) c->add("counter", 1);
        c->set("rank" + std::to_string(t), "value" + std::to_string(t));
        std::vector<std::string> keys;
        for (int u = 0; u < kThreads; ++u) keys.push_back("rank" + std::to_string(u));
        c->wait(keys, 5000ms);
        for (int u = 0; u < kThreads; ++u) {
          if (c->get("rank" + std::to_string(u), 1000ms) != "value" + std::to_string(u)) failures++;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto c = client_for(server);
  EXPECT_EQ(c->add("counter", 0), kThreads * kAdds);
}

TEST(Store, SharedClientAcrossThreads) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto c = client_for(server);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) c->add("n", 1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(c->get("n", 100ms), "400");
}

TEST(Store, GetBlocksUntilAnotherClientSets) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto waiter = client_for(server);
  auto setter = client_for(server);
  auto start = Clock::now();
  auto fut = std::async(std::launch::async, [&] { return waiter->get("late", 5000ms); });
  EXPECT_EQ(fut.wait_for(200ms), std::future_status::timeout) << "get returned before the key was set";
  setter->set("late", "finally");
  ASSERT_EQ(fut.wait_for(1000ms), std::future_status::ready) << "get was not woken by the set";
  EXPECT_EQ(fut.get(), "finally");
  long long elapsed = ms_since(start);
  EXPECT_GE(elapsed, 190);
  EXPECT_LT(elapsed, 1500);
}

TEST(Store, WaitBlocksUntilAllKeysSet) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto waiter = client_for(server);
  auto setter = client_for(server);
  setter->set("a", "1");
  auto fut = std::async(std::launch::async, [&] { waiter->wait({"a", "b", "c"}, 5000ms); });
  setter->set("c", "3");
  EXPECT_EQ(fut.wait_for(150ms), std::future_status::timeout) << "wait returned with 'b' missing";
  setter->add("b", 2);
  ASSERT_EQ(fut.wait_for(1000ms), std::future_status::ready);
  fut.get();
  // Several waiters parked on the same key all wake.
  std::vector<std::unique_ptr<StoreClient>> clients;
  std::vector<std::future<std::string>> futs;
  for (int i = 0; i < 5; ++i) clients.push_back(client_for(server));
  for (auto& c : clients) {
    StoreClient* p = c.get();
    futs.push_back(std::async(std::launch::async, [p] { return p->get("shared", 5000ms); }));
  }
  std::this_thread::sleep_for(50ms);
  setter->set("shared", "S");
  for (auto& f : futs) {
    ASSERT_EQ(f.wait_for(1000ms), std::future_status::ready);
    EXPECT_EQ(f.get(), "S");
  }
}

TEST(Store, GetTimeoutNamesKeyAndStaysUsable) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto c = client_for(server);
  auto start = Clock::now();
  std::string msg = expect_error(Status::timeout, [&] { c->get("never-set-key", 200ms); });
  long long elapsed = ms_since(start);
  EXPECT_NE(msg.find("never-set-key"), std::string::npos) << msg;
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << msg;
  EXPECT_GE(elapsed, 190);
  EXPECT_LT(elapsed, 1500);
  // The server answered the timeout itself, so the connection is still in step.
  c->set("after", "ok");
  EXPECT_EQ(c->get("after", 100ms), "ok");
  // A zero timeout on a missing key answers at once.
  start = Clock::now();
  expect_error(Status::timeout, [&] { c->get("nope", 0ms); });
  EXPECT_LT(ms_since(start), 500);
}

TEST(Store, WaitTimeoutNamesMissingKeys) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto c = client_for(server);
  c->set("present", "x");
  std::string msg = expect_error(Status::timeout, [&] { c->wait({"present", "absent-1", "absent-2"}, 150ms); });
  EXPECT_NE(msg.find("absent-1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("absent-2"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("'present'"), std::string::npos) << msg;
  EXPECT_EQ(c->add("x", 1), 1);
}

TEST(Store, WrongSecretRefused) {
  StoreServer server("127.0.0.1", 0, kSecret);
  std::string where = "127.0.0.1:" + std::to_string(server.port());
  std::string msg = expect_error(Status::invalid_argument, [&] { StoreClient c("127.0.0.1", server.port(), "wrong", 2000ms); });
  EXPECT_NE(msg.find("job secret refused by the store at " + where), std::string::npos) << msg;
  EXPECT_EQ(server.rejected_connections(), 1u);
  // Same length, one byte different; and an empty secret.
  std::string near = kSecret;
  near.back() ^= 1;
  expect_error(Status::invalid_argument, [&] { StoreClient c("127.0.0.1", server.port(), near, 2000ms); });
  expect_error(Status::invalid_argument, [&] { StoreClient c("127.0.0.1", server.port(), "", 2000ms); });
  EXPECT_EQ(server.rejected_connections(), 3u);
  auto good = client_for(server);
  good->set("k", "v");
  EXPECT_EQ(good->get("k", 100ms), "v");
}

TEST(Store, MalformedPeersAreRejectedOthersKeepWorking) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto good = client_for(server);
  auto setter = client_for(server);
  // A good client parked in a GET for the whole test must be answered at the end.
  auto parked_client = client_for(server);
  auto parked = std::async(std::launch::async, [&] { return parked_client->get("end", 10000ms); });
  uint64_t rejected = server.rejected_connections();
  int round = 0;

  auto expect_rejected = [&](const char* what, const std::function<void(RawConn&)>& attack) {
    SCOPED_TRACE(what);
    {
      RawConn raw(server.port());
      attack(raw);
      EXPECT_TRUE(raw.closed_by_server()) << "server kept the connection open";
    }
    EXPECT_TRUE(wait_until([&] { return server.rejected_connections() == rejected + 1; }, 2000ms))
        << "rejected_connections() = " << server.rejected_connections() << ", expected " << rejected + 1;
    rejected = server.rejected_connections();
    std::string key = "round" + std::to_string(round++);
    good->set(key, what);
    EXPECT_EQ(setter->get(key, 1000ms), what);
  };
  auto handshake = [&](RawConn& raw) {
    raw.send(hello());
    ASSERT_EQ(raw.recv_exact(4), std::string(4, '\0')) << "no welcome";
  };

  expect_rejected("garbage magic", [](RawConn& raw) { raw.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"); });
  expect_rejected("binary garbage", [](RawConn& raw) { raw.send(std::string("\xde\xad\xbe\xef\x00\x01\x02\x03", 8)); });
  expect_rejected("huge secret length", [](RawConn& raw) {
    std::string s = "WEFTSTOR";
    le32(s, 1);
    le32(s, 0xfffffff0u);
    raw.send(s);
  });
  expect_rejected("huge frame length", [&](RawConn& raw) {
    handshake(raw);
    std::string f;
    le32(f, 0xfffffff0u);
    f += '\x01';
    raw.send(f);
  });
  expect_rejected("frame just over kMaxFrame", [&](RawConn& raw) {
    handshake(raw);
    std::string f;
    le32(f, weft::bootstrap::kMaxFrame + 1);
    raw.send(f);
  });
  expect_rejected("empty frame", [&](RawConn& raw) {
    handshake(raw);
    std::string f;
    le32(f, 0);
    raw.send(f);
  });
  expect_rejected("key length overruns frame", [&](RawConn& raw) {
    handshake(raw);
    std::string body;
    body += '\x01';  // SET
    le32(body, 1000);
    body += "abc";
    std::string f;
    le32(f, static_cast<uint32_t>(body.size()));
    raw.send(f + body);
  });
  expect_rejected("value length overruns frame", [&](RawConn& raw) {
    handshake(raw);
    std::string body;
    body += '\x01';
    le32(body, 1);
    body += "k";
    le32(body, 0x7fffffffu);
    body += "v";
    std::string f;
    le32(f, static_cast<uint32_t>(body.size()));
    raw.send(f + body);
  });
  expect_rejected("key longer than kMaxKey", [&](RawConn& raw) {
    handshake(raw);
    std::string body;
    body += '\x02';  // GET
    le64(body, 0);
    le32(body, weft::bootstrap::kMaxKey + 1);
    body += std::string(weft::bootstrap::kMaxKey + 1, 'k');
    std::string f;
    le32(f, static_cast<uint32_t>(body.size()));
    raw.send(f + body);
  });
  expect_rejected("WAIT key count overruns frame", [&](RawConn& raw) {
    handshake(raw);
    std::string body;
    body += '\x04';
    le64(body, 0);
    le32(body, 0x40000000u);
    std::string f;
    le32(f, static_cast<uint32_t>(body.size()));
    raw.send(f + body);
  });
  expect_rejected("trailing bytes after fields", [&](RawConn& raw) {
    handshake(raw);
    std::string body;
    body += '\x03';  // ADD
    le32(body, 1);
    body += "k";
    le64(body, 1);
    body += "junk";
    std::string f;
    le32(f, static_cast<uint32_t>(body.size()));
    raw.send(f + body);
  });
  expect_rejected("unknown op", [&](RawConn& raw) {
    handshake(raw);
    std::string f;
    le32(f, 1);
    f += '\x7f';
    raw.send(f);
  });
  expect_rejected("truncated frame then close", [&](RawConn& raw) {
    handshake(raw);
    std::string body;
    body += '\x01';
    le32(body, 3);
    body += "key";
    le32(body, 100);
    body += "only-part-of-the-value";
    std::string f;
    le32(f, 1 + 4 + 3 + 4 + 100);
    raw.send(f + body);
    raw.close_write();
  });
  expect_rejected("truncated handshake then close", [](RawConn& raw) {
    raw.send(hello().substr(0, 13));
    raw.close_write();
  });
  EXPECT_EQ(server.rejected_connections(), 14u);

  // Nothing above disturbed the parked client.
  EXPECT_EQ(parked.wait_for(0ms), std::future_status::timeout);
  setter->set("end", "done");
  ASSERT_EQ(parked.wait_for(2000ms), std::future_status::ready);
  EXPECT_EQ(parked.get(), "done");
  // A peer that connects and leaves without a word is not an attack.
  { RawConn idle(server.port()); }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.rejected_connections(), 14u);
}

TEST(Store, OtherProtocolVersionRefused) {
  StoreServer server("127.0.0.1", 0, kSecret);
  RawConn raw(server.port());
  std::string h = "WEFTSTOR";
  le32(h, 99);
  le32(h, static_cast<uint32_t>(kSecret.size()));
  raw.send(h + kSecret);
  EXPECT_EQ(raw.recv_exact(4), std::string("\x02\x00\x00\x00", 4));  // version refused
  EXPECT_TRUE(raw.closed_by_server());
  EXPECT_EQ(server.rejected_connections(), 1u);
}

TEST(Store, FramesSplitIntoSingleBytesAreFine) {
  StoreServer server("127.0.0.1", 0, kSecret);
  RawConn raw(server.port());
  std::string body;
  body += '\x01';  // SET
  le32(body, 5);
  body += "split";
  le32(body, 6);
  body += "pieces";
  std::string bytes = hello();
  le32(bytes, static_cast<uint32_t>(body.size()));
  bytes += body;
  for (char ch : bytes) {
    raw.send(std::string(1, ch));
    std::this_thread::sleep_for(1ms);
  }
  std::string welcome = raw.recv_exact(4);
  EXPECT_EQ(welcome, std::string(4, '\0'));
  std::string reply = raw.recv_exact(5);
  ASSERT_EQ(reply.size(), 5u);
  EXPECT_EQ(reply, std::string("\x01\x00\x00\x00\x00", 5));  // length 1, status ok
  auto c = client_for(server);
  EXPECT_EQ(c->get("split", 500ms), "pieces");
  EXPECT_EQ(server.rejected_connections(), 0u);
}

TEST(Store, ConnectToNobodyTimesOutWithinDeadline) {
  uint16_t port = unused_port();
  auto start = Clock::now();
  std::string msg = expect_error(Status::timeout, [&] { StoreClient c("127.0.0.1", port, kSecret, 300ms); });
  long long elapsed = ms_since(start);
  EXPECT_GE(elapsed, 290);
  EXPECT_LT(elapsed, 1000);
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
}

TEST(Store, UnresolvableHostTimesOut) {
  std::string msg =
      expect_error(Status::timeout, [&] { StoreClient c("no-such-host.invalid", 29500, kSecret, 200ms); });
  EXPECT_NE(msg.find("no-such-host.invalid:29500"), std::string::npos) << msg;
}

TEST(Store, ClientRetriesUntilServerStarts) {
  uint16_t port = unused_port();
  auto fut = std::async(std::launch::async, [&] {
    StoreClient c("127.0.0.1", port, kSecret, 5000ms);
    return c.get("hello", 3000ms);
  });
  std::this_thread::sleep_for(300ms);
  StoreServer server("127.0.0.1", port, kSecret);
  auto c = client_for(server);
  c->set("hello", "world");
  ASSERT_EQ(fut.wait_for(3000ms), std::future_status::ready);
  EXPECT_EQ(fut.get(), "world");
}

TEST(Store, ServerDestroyedWhileClientWaits) {
  auto server = std::make_unique<StoreServer>("127.0.0.1", 0, kSecret);
  std::string where = "127.0.0.1:" + std::to_string(server->port());
  auto c = client_for(*server);
  auto fut = std::async(std::launch::async, [&]() -> std::string {
    return expect_error(Status::transport, [&] { c->get("forever", 30000ms); });
  });
  std::this_thread::sleep_for(100ms);
  auto start = Clock::now();
  server.reset();
  ASSERT_EQ(fut.wait_for(2000ms), std::future_status::ready) << "client not released when the server died";
  EXPECT_LT(ms_since(start), 1000);
  std::string msg = fut.get();
  EXPECT_NE(msg.find(where), std::string::npos) << msg;
  EXPECT_NE(msg.find("forever"), std::string::npos) << msg;
  // Later calls fail at once, still as transport errors.
  expect_error(Status::transport, [&] { c->set("x", "y"); });
}

TEST(Store, SecondServerOnSamePortAfterFirstCloses) {
  uint16_t port;
  {
    StoreServer first("127.0.0.1", 0, kSecret);
    port = first.port();
    auto c = client_for(first);
    c->set("a", "b");
  }
  // SO_REUSEADDR: the port is usable again at once despite TIME_WAIT connections.
  StoreServer second("127.0.0.1", port, kSecret);
  EXPECT_EQ(second.port(), port);
}

TEST(Store, ClientRejectsOversizedKey) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto c = client_for(server);
  std::string key(weft::bootstrap::kMaxKey + 1, 'k');
  expect_error(Status::invalid_argument, [&] { c->set(key, "v"); });
  expect_error(Status::invalid_argument, [&] { c->get(key, 10ms); });
  c->set("still", "fine");
}
