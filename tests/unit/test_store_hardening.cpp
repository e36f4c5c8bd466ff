// The rendezvous store under hostile or broken peers (core/bootstrap/store.h, StoreLimits): a
// real server on loopback with short deadlines, and raw sockets that stay silent, stop halfway
// through a frame, never read their replies, exceed the connection limit, send oversize or
// malformed frames, or offer wrong secrets. Each time a good client must still complete its
// set/get within a bound, and the bad peer must be refused the documented way. The socket-free
// decoder the server calls (wire::next_step / wire::process_frame) is checked directly too.
// WEFT_TEST_INJECT=1 flips every check's truth once; the run passes only when each flip was
// caught (unit.store_hardening_inject).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "core/common/status.h"
#include "inject_tally.h"
#include "raw_store_conn.h"

using namespace std::chrono_literals;
using weft::Error;
using weft::Status;
using weft::bootstrap::kMaxFrame;
using weft::bootstrap::kMaxKey;
using weft::bootstrap::StoreClient;
using weft::bootstrap::StoreLimits;
using weft::bootstrap::StoreServer;
namespace wire = weft::bootstrap::wire;
using Clock = std::chrono::steady_clock;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

const std::string kSecret = "hardening-secret-42";
// A good client's 20 set/get round trips take milliseconds; the bound leaves room for a loaded
// 2-core machine and is still far below every deadline a bad peer could make it wait for.

using inject::check;

StoreLimits short_limits() {
  StoreLimits l;
  l.max_connections = 256;
  l.handshake_timeout = 800ms;
  l.frame_timeout = 800ms;
  l.write_timeout = 1000ms;
  l.max_queued_output = 64 * 1024;
  return l;
}

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

using store_test::framed;
using store_test::hello;
using store_test::le32;
using store_test::le64;

std::string get_body(const std::string& key, uint64_t timeout_ms) {
  std::string b(1, '\x02');
  le64(b, timeout_ms);
  le32(b, static_cast<uint32_t>(key.size()));
  return b + key;
}

// One hand-driven TCP connection to the store; login() defaults to this test's secret.
class Raw : public store_test::RawStoreConn {
 public:
  using RawStoreConn::RawStoreConn;
  bool login(const std::string& secret = kSecret) { return RawStoreConn::login(secret); }
};

std::unique_ptr<StoreClient> client_for(const StoreServer& s, std::chrono::milliseconds timeout = 5000ms) {
  return std::make_unique<StoreClient>("127.0.0.1", s.port(), kSecret, timeout);
}

// A good client's 20 set/get round trips: true when every value came back. Whether it was
// served *while* a misbehaving client held on is proven by that client still being connected
// afterwards (rejected_connections() == 0), not by a wall-clock bound: a loaded 2-core machine
// under ASan once took longer than any bound well below the deadlines these tests use.
bool good_client_served(const StoreServer& s, const std::string& tag) {
  try {
    auto c = client_for(s);
    for (int i = 0; i < 20; ++i) {
      const std::string key = tag + "/" + std::to_string(i);
      c->set(key, "value-" + key);
      if (c->get(key, 5000ms) != "value-" + key) return false;
    }
  } catch (const Error& e) {
    ADD_FAILURE() << tag << ": " << e.what();
    return false;
  }
  return true;
}

}  // namespace

TEST(StoreHardening, SilentAndHalfHandshakeClientsDoNotBlockOthers) {
  StoreLimits limits = short_limits();
  limits.handshake_timeout = 6000ms;  // the good client is served well inside it, under ASan too
  StoreServer server("127.0.0.1", 0, kSecret, limits);
  std::vector<std::unique_ptr<Raw>> silent;
  for (int i = 0; i < 24; ++i) silent.push_back(std::make_unique<Raw>(server.port()));
  for (int i = 0; i < 8; ++i) {
    silent.push_back(std::make_unique<Raw>(server.port()));
    silent.back()->send(hello(kSecret).substr(0, 5 + i));  // stops inside the handshake
  }
  bool all_connected = true;
  for (auto& r : silent) all_connected = all_connected && r->connected();
  check(all_connected && wait_until([&] { return server.open_connections() == 32; }, 5000ms),
        "every silent client connected");
  check(good_client_served(server, "silent"), "a good client was served while 32 clients stayed silent");
  check(server.rejected_connections() == 0, "silent clients were dropped before their handshake deadline");
  // Past handshake_timeout each silent or half-speaking connection is dropped.
  bool all_dropped = true;
  for (auto& r : silent) all_dropped = r->closed_by_server(12000ms) && all_dropped;
  check(all_dropped, "silent clients were dropped after the handshake timeout");
  check(wait_until([&] { return server.rejected_connections() == 32; }, 8000ms),
        "rejected " + std::to_string(server.rejected_connections()) + " of 32 silent clients");
}

TEST(StoreHardening, HalfFrameClientIsDroppedOthersServed) {
  StoreLimits limits = short_limits();
  limits.frame_timeout = 5000ms;  // the good client is served well inside it, under ASan too
  StoreServer server("127.0.0.1", 0, kSecret, limits);
  Raw half(server.port());
  const bool welcomed = half.login();
  check(welcomed, "the half-frame client authenticated");
  std::string body(1, '\x01');  // SET key "k", a 100-byte value of which only 10 bytes come
  le32(body, 1);
  body += "k";
  le32(body, 100);
  std::string f;
  le32(f, static_cast<uint32_t>(body.size() + 100));
  const auto sent = Clock::now();
  half.send(f + body + std::string(10, 'v'));
  check(good_client_served(server, "half"), "a good client was served while another sat on half a frame");
  check(server.rejected_connections() == 0, "the half-frame client was dropped before its deadline");
  const bool dropped = half.closed_by_server(10000ms);
  const long long after = ms_since(sent);
  check(dropped, "the half-frame connection was dropped");
  // Not before its deadline (frame_timeout, 5000 ms; a frame under 1 MiB gets no extra time).
  check(after >= 4900, "dropped after " + std::to_string(after) + " ms, before the 5000 ms frame deadline");
  check(server.rejected_connections() == 1, "rejected " + std::to_string(server.rejected_connections()));
}

TEST(StoreHardening, ClientThatNeverReadsIsBoundedAndDropped) {
  StoreLimits limits = short_limits();
  limits.write_timeout = 5000ms;  // the good client is served well inside it, under ASan too
  StoreServer server("127.0.0.1", 0, kSecret, limits);
  const std::string big_key(4000, 'b');
  client_for(server)->set(big_key, std::string(1 << 20, 'x'));  // each GET answers 1 MiB
  Raw hog(server.port());
  check(hog.login(), "the non-reading client authenticated");
  // Pipeline GETs and read nothing: the server must stop reading them once max_queued_output
  // waits, so the hog's own sends stall (an unbounded server would read all 4000 and queue 4 GiB).
  ::fcntl(hog.fd(), F_SETFL, O_NONBLOCK);
  const std::string request = framed(get_body(big_key, 0));
  int sent = 0;
  bool stalled = false;
  for (; sent < 4000 && !stalled; ++sent) {
    size_t off = 0;
    while (off < request.size()) {
      const ssize_t n = ::send(hog.fd(), request.data() + off, request.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      pollfd p{hog.fd(), POLLOUT, 0};
      if (::poll(&p, 1, 300) == 0) {
        stalled = true;  // 300 ms without room: the server is not reading
        break;
      }
    }
  }
  check(stalled, "the server kept reading a client that takes no replies (" + std::to_string(sent) + " GETs sent)");
  check(good_client_served(server, "hog"), "a good client was served while another read nothing");
  check(server.rejected_connections() == 0, "the non-reading client was dropped before its write deadline");
  // Nothing taken for write_timeout (5 s): dropped.
  check(wait_until([&] { return server.rejected_connections() == 1 && server.open_connections() == 0; }, 15000ms),
        "the non-reading connection was not dropped after its write timeout");
}

TEST(StoreHardening, ConnectionsBeyondTheLimitAreRefusedOthersKeepWorking) {
  StoreLimits limits = short_limits();
  limits.max_connections = 4;
  limits.handshake_timeout = 5000ms;  // far from "at once" below, under ASan too
  StoreServer server("127.0.0.1", 0, kSecret, limits);
  std::vector<std::unique_ptr<StoreClient>> in;
  for (int i = 0; i < 4; ++i) in.push_back(client_for(server));
  check(wait_until([&] { return server.open_connections() == 4; }, 5000ms), "four connections open");
  Raw extra(server.port());
  // At once: well before the 5000 ms handshake timeout would close it anyway.
  check(extra.closed_by_server(1500ms), "a fifth connection was not closed at once");
  // Counted before the close (store_server.cpp); waited for all the same, as a loaded CI
  // machine once read 0 here when the count came after the close.
  check(wait_until([&] { return server.refused_over_limit() == 1; }, 2000ms),
        "refused over limit: " + std::to_string(server.refused_over_limit()));
  // A client that arrives while the store is full retries until its deadline, naming the limit.
  std::string msg;
  try {
    StoreClient late("127.0.0.1", server.port(), kSecret, 300ms);
  } catch (const Error& e) {
    msg = e.what();
  }
  check(msg.find("connection limit") != std::string::npos, "the refused client says why: '" + msg + "'");
  // The four inside are served throughout.
  bool inside_ok = true;
  for (size_t i = 0; i < in.size(); ++i) {
    in[i]->set("in" + std::to_string(i), "v");
    inside_ok = inside_ok && in[(i + 1) % in.size()]->get("in" + std::to_string(i), 5000ms) == "v";
  }
  check(inside_ok, "clients inside the limit kept working");
  // One leaves: a client already retrying gets in.
  auto waiting = std::async(std::launch::async, [&] {
    StoreClient c("127.0.0.1", server.port(), kSecret, 5000ms);
    return c.add("counter", 1);
  });
  std::this_thread::sleep_for(200ms);
  in.pop_back();
  check(waiting.wait_for(5000ms) == std::future_status::ready && waiting.get() == 1,
        "a retrying client got in once a slot freed");
  check(server.rejected_connections() == 0, "over-limit refusals are not counted as rejections");
}

TEST(StoreHardening, OversizeAndMalformedFramesRefused) {
  StoreServer server("127.0.0.1", 0, kSecret, short_limits());
  uint64_t rejected = 0;
  auto refused = [&](const std::string& what, const std::string& bytes, bool login) {
    Raw raw(server.port());
    const bool in = !login || raw.login();
    raw.send(bytes);
    const bool closed = in && raw.closed_by_server(2000ms);
    const bool counted = wait_until([&] { return server.rejected_connections() == rejected + 1; }, 5000ms);
    rejected = server.rejected_connections();
    check(closed && counted, what + " was not refused");
  };
  std::string huge_len;
  le32(huge_len, kMaxFrame + 1);
  refused("a frame announced one byte over kMaxFrame", huge_len + "\x01", true);
  std::string huge_secret = "WEFTSTOR";
  le32(huge_secret, 1);
  le32(huge_secret, wire::kMaxSecret + 1);
  refused("a secret announced over kMaxSecret", huge_secret, false);
  std::string long_key(1, '\x02');
  le64(long_key, 0);
  le32(long_key, kMaxKey + 1);
  refused("a key over kMaxKey", framed(long_key + std::string(kMaxKey + 1, 'k')), true);
  refused("an unknown op", framed("\x7f"), true);
  std::string add(1, '\x03');
  le32(add, 1);
  add += "k";
  le64(add, 1);
  refused("trailing bytes", framed(add + "junk"), true);
  std::string overrun(1, '\x01');
  le32(overrun, 1000);
  refused("a key overrunning its frame", framed(overrun + "abc"), true);
  refused("garbage instead of a handshake", "GET / HTTP/1.1\r\n\r\n", false);
  check(good_client_served(server, "malformed"), "a good client was served after the refusals");
}

TEST(StoreHardening, WrongSecretsAllGetTheSameAnswer) {
  StoreServer server("127.0.0.1", 0, kSecret, short_limits());
  std::string near = kSecret;
  near.back() ^= 1;
  std::string binary(wire::kMaxSecret, '\0');
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>((i * 131 + 7) & 0xff);
  const std::vector<std::string> wrong = {near, kSecret.substr(0, 3), kSecret + "x", "", binary};
  // On the wire: the same four bytes (secret_refused) and then the end, for every wrong secret.
  std::string first;
  bool same_answer = true;
  for (const std::string& w : wrong) {
    Raw raw(server.port());
    raw.send(hello(w));
    const std::string answer = raw.recv_upto(64, 2000ms);  // everything up to EOF
    if (first.empty()) first = answer;
    same_answer = same_answer && answer == first;
  }
  std::string refused_bytes;
  le32(refused_bytes, static_cast<uint32_t>(wire::HandshakeStatus::secret_refused));
  check(first == refused_bytes, "a wrong secret is answered with secret_refused and nothing else");
  check(same_answer, "every wrong secret got the same bytes");
  check(server.rejected_connections() == wrong.size(), "every wrong secret was refused");
  // Through the client: one status and one message for a near miss, an empty and a binary secret.
  std::vector<std::string> messages;
  bool all_invalid = true;
  for (const std::string& w : {near, std::string(), binary}) {
    try {
      StoreClient c("127.0.0.1", server.port(), w, 2000ms);
      messages.push_back("accepted");
    } catch (const Error& e) {
      all_invalid = all_invalid && e.status() == Status::invalid_argument;
      messages.push_back(e.message());
    }
  }
  check(all_invalid, "a wrong secret is refused as invalid_argument");
  check(messages[0] == messages[1] && messages[1] == messages[2],
        "the messages differ: '" + messages[0] + "' / '" + messages[1] + "' / '" + messages[2] + "'");
  // In the decoder: one reason for every wrong secret.
  bool one_reason = true;
  for (const std::string& w : wrong) {
    const wire::Step s = wire::next_step(hello(w), false, kSecret);
    one_reason = one_reason && s.kind == wire::Step::Kind::handshake &&
                 s.answer == wire::HandshakeStatus::secret_refused && s.error == "wrong job secret";
  }
  check(one_reason, "the decoder gives one reason for every wrong secret");
  check(good_client_served(server, "secret"), "the right secret still gets in");
}

TEST(StoreHardening, DecoderIsPureAndExact) {
  // Byte by byte, a GET frame is "need more" until its last byte, then exactly that request.
  const std::string frame = framed(get_body("key", 1234));
  bool waits = true;
  for (size_t n = 0; n < frame.size(); ++n) {
    const wire::Step s = wire::next_step(std::string_view(frame).substr(0, n), true, kSecret);
    waits = waits && s.kind == wire::Step::Kind::need_more && s.consumed == 0;
  }
  check(waits, "a partial frame is not 'need more'");
  const wire::Step whole = wire::next_step(frame + "tail", true, kSecret);
  check(whole.kind == wire::Step::Kind::request && whole.consumed == frame.size() &&
            whole.request.op == wire::Op::get && whole.request.key == "key" && whole.request.timeout_ms == 1234,
        "a whole GET frame decodes to exactly its fields");
  // WAIT with two keys, and ADD with a negative delta.
  std::string wait(1, '\x04');
  le64(wait, 5);
  le32(wait, 2);
  le32(wait, 1);
  wait += "a";
  le32(wait, 2);
  wait += "bc";
  wire::Request req;
  std::string why;
  check(wire::process_frame(wait, &req, &why) && req.op == wire::Op::wait && req.timeout_ms == 5 &&
            req.keys == std::vector<std::string>{"a", "bc"},
        "WAIT decodes: " + why);
  std::string add(1, '\x03');
  le32(add, 1);
  add += "n";
  le64(add, static_cast<uint64_t>(int64_t{-7}));
  check(wire::process_frame(add, &req, &why) && req.op == wire::Op::add && req.key == "n" && req.delta == -7,
        "ADD decodes: " + why);
  // A WAIT whose count cannot fit is refused before anything is reserved for it.
  std::string greedy(1, '\x04');
  le64(greedy, 0);
  le32(greedy, 0x40000000u);
  check(!wire::process_frame(greedy, &req, &why) && why.find("cannot fit") != std::string::npos,
        "a WAIT count beyond the frame was accepted");
}
