#include "transports/shm/p2p_rings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include "core/common/status.h"

namespace weft::shm {
namespace {

using transport::Op;
using transport::Tag;

constexpr uint64_t kMagic = 0x3170327074666577ull;  // "weftp2p1": p2p inbox, layout 1
constexpr size_t kLine = 64;
constexpr size_t kHeaderBytes = kLine;     // magic, rings, chunks, chunk bytes
constexpr size_t kControlBytes = 2 * kLine;  // head and tail, each on its own cache line
constexpr size_t kChunkHeaderBytes = kLine;

struct InboxHeader {
  uint64_t magic;
  uint64_t rings;
  uint64_t chunks;
  uint64_t chunk_bytes;
};

// Written by the sender in front of every chunk's payload.
struct ChunkHeader {
  uint64_t tag;
  uint64_t message_bytes;  // the whole message's size
  uint32_t length;         // payload bytes in this chunk
  uint32_t kind;           // kData, or kCancelled: the message in progress ends here, unfinished
};
constexpr uint32_t kData = 0;
constexpr uint32_t kCancelled = 1;
// Unmatched one-chunk messages copied aside per sender before further ones wait in the ring.
// Without a bound, a sender that no receive holds back (the non-roots of a gather loop) runs
// ahead without limit and the receiver's heap grows with every call; with it, that sender
// waits once 32 messages plus a ring are ahead, as MPI's eager credits make it do. Copying
// aside never stops while a receive posted for the same sender needs a later message, so
// matching still always progresses.
constexpr size_t kMaxStashedPerSender = 32;

size_t data_offset(size_t rings) { return (kHeaderBytes + kControlBytes * rings + 4095) & ~size_t{4095}; }

void finish(Op& op, Op::State state, const char* error = nullptr) {
  if (error) op.error = error;
  op.state.store(state, std::memory_order_release);
}

}  // namespace

struct P2pRings::Ring {
  std::atomic<uint64_t>* head;  // chunks written (sender)
  std::atomic<uint64_t>* tail;  // chunks consumed (receiver)
  char* chunks;
};

struct P2pRings::Pending {
  Op* op;
  Tag tag;
  char* buf;  // receives write it; sends only read it
  size_t bytes;
  size_t offset = 0;     // bytes moved so far
  bool started = false;  // a send's first chunk is in the ring
  uint64_t first_chunk = 0;  // a started send's first chunk's index
};

struct P2pRings::Unexpected {
  Tag tag = 0;
  size_t size = 0;
  std::vector<char> data;  // capacity kept when the entry is recycled
  bool complete = false;
};

struct P2pRings::Outbox {
  Ring ring;
  uint64_t head = 0;  // our copy of ring.head (we are its only writer)
  std::vector<Pending> queue;  // short: a vector's front erase beats a deque's block churn
  bool owe_cancel_marker = false;
};

struct P2pRings::Inbox {
  Ring ring;
  uint64_t tail = 0;
  std::vector<Pending> posted;
  std::list<Unexpected> unexpected;  // in arrival order
  std::list<Unexpected> spare;       // finished entries, reused (their buffers too)
  // The message being received: its destination is a posted receive, an unexpected entry, or
  // nowhere (discard: truncated or cancelled receive).
  bool active = false;
  Tag tag = 0;
  size_t bytes = 0;
  size_t offset = 0;
  Op* target = nullptr;
  char* target_buf = nullptr;
  Unexpected* stash = nullptr;
};

P2pRings::P2pRings(std::string name, char* base, size_t bytes, int self, std::vector<int> local, int npeers,
                   RingShape shape)
    : inbox_name_(std::move(name)), base_(base), bytes_(bytes), self_(self), local_(std::move(local)), shape_(shape) {
  ring_bytes_ = static_cast<size_t>(shape_.chunks) * (kChunkHeaderBytes + shape_.chunk_bytes);
  local_index_of_.assign(static_cast<size_t>(npeers), -1);
  for (size_t i = 0; i < local_.size(); ++i) local_index_of_[static_cast<size_t>(local_[i])] = static_cast<int>(i);
  out_.resize(local_.size());
  in_.resize(local_.size());
  peer_maps_.assign(local_.size(), {nullptr, 0});
}

std::unique_ptr<P2pRings> P2pRings::create(const std::string& inbox_name, int self, const std::vector<int>& local,
                                           int npeers, RingShape shape) {
  if (shape.chunks < 2 || shape.chunk_bytes < kLine || shape.chunk_bytes % kLine != 0) {
    fail(Status::invalid_argument, "shared-memory rings need >= 2 chunks of a multiple of %zu bytes (got %d x %zu)",
         kLine, shape.chunks, shape.chunk_bytes);
  }
  if (std::find(local.begin(), local.end(), self) == local.end()) {
    fail(Status::internal, "rank %d is missing from its own host's rank list", self);
  }
  const size_t rings = local.size() - 1;
  const size_t ring_bytes = static_cast<size_t>(shape.chunks) * (kChunkHeaderBytes + shape.chunk_bytes);
  const size_t bytes = data_offset(rings) + rings * ring_bytes;
  int fd = shm_open(inbox_name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail(Status::transport, "rank %d: shm_open(%s) to create its inbox failed: %s", self, inbox_name.c_str(), std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(inbox_name.c_str());
    fail(Status::out_of_memory, "rank %d: cannot size inbox %s to %zu bytes: %s", self, inbox_name.c_str(), bytes, std::strerror(e));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(inbox_name.c_str());
    fail(Status::out_of_memory, "rank %d: cannot map its %zu-byte inbox %s: %s", self, bytes, inbox_name.c_str(), std::strerror(e));
  }
  char* base = static_cast<char*>(p);
  auto* h = reinterpret_cast<InboxHeader*>(base);
  h->rings = rings;
  h->chunks = static_cast<uint64_t>(shape.chunks);
  h->chunk_bytes = shape.chunk_bytes;
  for (size_t r = 0; r < rings; ++r) {
    new (base + kHeaderBytes + kControlBytes * r) std::atomic<uint64_t>(0);
    new (base + kHeaderBytes + kControlBytes * r + kLine) std::atomic<uint64_t>(0);
  }
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  std::unique_ptr<P2pRings> rings_engine(new P2pRings(inbox_name, base, bytes, self, local, npeers, shape));
  const int me = rings_engine->local_index_of_[static_cast<size_t>(self)];
  for (int s = 0; s < static_cast<int>(local.size()); ++s) {
    if (s == me) continue;
    auto in = std::make_unique<Inbox>();
    in->ring = rings_engine->ring_at(base, rings_engine->ring_index_in(me, s));
    // Every entry the eager bound allows, made now: how far a sender runs ahead depends on the
    // scheduler, so entries made on demand would allocate at random points of a steady loop.
    // The buffers are reserved, not touched: a page costs memory once a message lands on it.
    in->spare.resize(kMaxStashedPerSender);
    for (Unexpected& u : in->spare) u.data.reserve(shape.chunk_bytes);
    rings_engine->in_[static_cast<size_t>(s)] = std::move(in);
  }
  return rings_engine;
}

int P2pRings::ring_index_in(int receiver_local, int sender_local) const {
  return sender_local < receiver_local ? sender_local : sender_local - 1;
}

P2pRings::Ring P2pRings::ring_at(char* base, int ring_index) const {
  const size_t rings = local_.size() - 1;
  char* control = base + kHeaderBytes + kControlBytes * static_cast<size_t>(ring_index);
  return Ring{reinterpret_cast<std::atomic<uint64_t>*>(control), reinterpret_cast<std::atomic<uint64_t>*>(control + kLine),
              base + data_offset(rings) + ring_bytes_ * static_cast<size_t>(ring_index)};
}

void P2pRings::attach(const std::vector<std::string>& names) {
  if (names.size() != local_.size()) fail(Status::internal, "rank %d: %zu inbox names for %zu local ranks", self_, names.size(), local_.size());
  const int me = local_index_of_[static_cast<size_t>(self_)];
  for (int i = 0; i < static_cast<int>(local_.size()); ++i) {
    if (i == me) continue;
    const std::string& name = names[static_cast<size_t>(i)];
    int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) fail(Status::transport, "rank %d: cannot open rank %d's inbox %s: %s", self_, local_[static_cast<size_t>(i)], name.c_str(), std::strerror(errno));
    struct stat st{};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes_) {
      close(fd);
      fail(Status::mismatch, "rank %d: rank %d's inbox %s has %lld bytes; expected %zu", self_, local_[static_cast<size_t>(i)],
           name.c_str(), static_cast<long long>(st.st_size), bytes_);
    }
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) fail(Status::out_of_memory, "rank %d: cannot map inbox %s: %s", self_, name.c_str(), std::strerror(e));
    peer_maps_[static_cast<size_t>(i)] = {static_cast<char*>(p), bytes_};
    const auto* h = static_cast<const InboxHeader*>(p);
    if (h->magic != kMagic || h->rings != local_.size() - 1 || h->chunks != static_cast<uint64_t>(shape_.chunks) ||
        h->chunk_bytes != shape_.chunk_bytes) {
      fail(Status::mismatch, "rank %d: %s is not a weft inbox with %zu rings of %d x %zu bytes", self_, name.c_str(),
           local_.size() - 1, shape_.chunks, shape_.chunk_bytes);
    }
    out_[static_cast<size_t>(i)] = std::make_unique<Outbox>();
    out_[static_cast<size_t>(i)]->ring = ring_at(static_cast<char*>(p), ring_index_in(i, me));
  }
}

void P2pRings::unlink_inbox() {
  if (linked_) shm_unlink(inbox_name_.c_str());
  linked_ = false;
}

P2pRings::~P2pRings() {
  unlink_inbox();
  for (auto& [p, n] : peer_maps_) {
    if (p) munmap(p, n);
  }
  munmap(base_, bytes_);
}

bool P2pRings::reaches(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(local_index_of_.size())) return false;
  const int i = local_index_of_[static_cast<size_t>(peer)];
  return i >= 0 && out_[static_cast<size_t>(i)] != nullptr;
}

void P2pRings::send(Op& op, int peer, Tag tag, const void* buf, size_t bytes) {
  op.begin(peer, false, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  Outbox& out = *out_[static_cast<size_t>(local_index_of_[static_cast<size_t>(peer)])];
  out.queue.push_back(Pending{&op, tag, static_cast<char*>(const_cast<void*>(buf)), bytes});
  ++pending_;
  push(out);  // small messages leave at once when the ring has room
}

void P2pRings::recv(Op& op, int peer, Tag tag, void* buf, size_t bytes) {
  op.begin(peer, true, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  Inbox& in = *in_[static_cast<size_t>(local_index_of_[static_cast<size_t>(peer)])];
  // The oldest arrived message with this tag is this receive's, finished or still arriving.
  auto it = std::find_if(in.unexpected.begin(), in.unexpected.end(), [&](const Unexpected& u) { return u.tag == tag; });
  if (it == in.unexpected.end()) {
    in.posted.push_back(Pending{&op, tag, static_cast<char*>(buf), bytes});
    ++pending_;
    return;
  }
  const size_t size = it->size;
  if (size > bytes) {
    if (!it->complete) in.stash = nullptr;  // the rest of it is dropped as it arrives
    in.spare.splice(in.spare.end(), in.unexpected, it);
    finish(op, Op::State::failed, "message truncated: the message is larger than the receive");
    return;
  }
  if (it->complete) {
    if (size) std::memcpy(buf, it->data.data(), size);
    op.received = size;
    in.spare.splice(in.spare.end(), in.unexpected, it);
    finish(op, Op::State::done);
    return;
  }
  // Still arriving: what is here moves to the receive, the rest goes there directly.
  if (in.offset) std::memcpy(buf, it->data.data(), in.offset);
  in.stash = nullptr;
  in.target = &op;
  in.target_buf = static_cast<char*>(buf);
  in.spare.splice(in.spare.end(), in.unexpected, it);
  ++pending_;
}

bool P2pRings::cancel(Op& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (op.finished() || op.peer < 0 || !reaches(op.peer)) return false;
  const size_t li = static_cast<size_t>(local_index_of_[static_cast<size_t>(op.peer)]);
  if (op.is_recv) {
    Inbox& in = *in_[li];
    if (in.target == &op) {
      in.target = nullptr;  // the rest of the message is dropped
      --pending_;
      finish(op, Op::State::failed, "cancelled");
      return true;
    }
    auto it = std::find_if(in.posted.begin(), in.posted.end(), [&](const Pending& p) { return p.op == &op; });
    if (it == in.posted.end()) return false;
    in.posted.erase(it);
  } else {
    Outbox& out = *out_[li];
    auto it = std::find_if(out.queue.begin(), out.queue.end(), [&](const Pending& p) { return p.op == &op; });
    if (it == out.queue.end()) return false;
    if (it->started) out.owe_cancel_marker = true;  // only the front can have started
    out.queue.erase(it);
  }
  --pending_;
  finish(op, Op::State::failed, "cancelled");
  return true;
}

bool P2pRings::push(Outbox& out) {
  bool moved = false;
  const uint64_t chunks = static_cast<uint64_t>(shape_.chunks);
  uint64_t tail = out.ring.tail->load(std::memory_order_acquire);
  while (out.owe_cancel_marker || !out.queue.empty()) {
    if (out.head - tail >= chunks) {
      tail = out.ring.tail->load(std::memory_order_acquire);
      if (out.head - tail >= chunks) break;  // full: the receiver has not caught up
    }
    char* chunk = out.ring.chunks + (out.head % chunks) * (kChunkHeaderBytes + shape_.chunk_bytes);
    auto* h = reinterpret_cast<ChunkHeader*>(chunk);
    if (out.owe_cancel_marker) {
      *h = ChunkHeader{0, 0, 0, kCancelled};
      out.owe_cancel_marker = false;
    } else {
      Pending& s = out.queue.front();
      // A message's second chunk waits until the receiver has taken its first: a message no
      // receive wants yet then holds one chunk of the ring, not all of them, and a cancel
      // marker behind it still fits (pull() looks one chunk past a waiting message).
      if (s.started && tail <= s.first_chunk) {
        tail = out.ring.tail->load(std::memory_order_acquire);
        if (tail <= s.first_chunk) break;
      }
      if (!s.started) s.first_chunk = out.head;
      const size_t length = std::min(shape_.chunk_bytes, s.bytes - s.offset);
      *h = ChunkHeader{s.tag, s.bytes, static_cast<uint32_t>(length), kData};
      if (length) std::memcpy(chunk + kChunkHeaderBytes, s.buf + s.offset, length);
      s.offset += length;
      s.started = true;
      if (s.offset == s.bytes) {
        Op* op = s.op;
        out.queue.erase(out.queue.begin());
        --pending_;
        finish(*op, Op::State::done);
      }
    }
    out.ring.head->store(++out.head, std::memory_order_release);
    moved = true;
  }
  return moved;
}

bool P2pRings::start_message(Inbox& in, Tag tag, size_t bytes) {
  auto it = std::find_if(in.posted.begin(), in.posted.end(), [&](const Pending& p) { return p.tag == tag; });
  // A message of more than one chunk that no receive wants yet stays in the ring (as UCX's
  // rendezvous leaves it at the sender), so it is copied once, straight into its receive, and
  // nothing is allocated for it. It is copied aside only when a receive posted for this peer
  // needs a later message; a one-chunk message is copied aside at once, as UCX's eager
  // protocol does, so small sends complete without their receives, up to
  // kMaxStashedPerSender of them.
  if (it == in.posted.end() && in.posted.empty() &&
      (bytes > shape_.chunk_bytes || in.unexpected.size() >= kMaxStashedPerSender)) {
    return false;
  }
  in.active = true;
  in.tag = tag;
  in.bytes = bytes;
  in.offset = 0;
  in.target = nullptr;
  in.target_buf = nullptr;
  in.stash = nullptr;
  if (it == in.posted.end()) {
    if (in.spare.empty()) in.spare.emplace_back();
    in.unexpected.splice(in.unexpected.end(), in.spare, in.spare.begin());
    Unexpected& u = in.unexpected.back();
    u.tag = tag;
    u.size = bytes;
    u.complete = false;
    if (u.data.size() < bytes) u.data.resize(bytes);  // within the reserve for one-chunk messages
    in.stash = &u;
    return true;
  }
  Op* op = it->op;
  char* buf = it->buf;
  const size_t room = it->bytes;
  in.posted.erase(it);
  if (bytes > room) {
    --pending_;
    finish(*op, Op::State::failed, "message truncated: the message is larger than the receive");
    return true;  // no destination: the message is dropped
  }
  in.target = op;
  in.target_buf = buf;
  return true;
}

bool P2pRings::take_chunk(Inbox& in, const char* chunk) {
  ChunkHeader h;
  std::memcpy(&h, chunk, sizeof(h));
  if (h.kind == kCancelled) {
    // The sender gave up on the message in progress: fail its receive, forget its bytes.
    if (in.active) {
      if (in.target) {
        --pending_;
        finish(*in.target, Op::State::failed, "the sender cancelled the message");
      }
      if (in.stash) {
        auto it = std::find_if(in.unexpected.begin(), in.unexpected.end(), [&](const Unexpected& u) { return &u == in.stash; });
        in.spare.splice(in.spare.end(), in.unexpected, it);
      }
    }
    in.active = false;
    return true;
  }
  if (!in.active && !start_message(in, h.tag, h.message_bytes)) return false;
  const size_t length = std::min<size_t>(h.length, in.bytes - in.offset);
  if (length) {
    if (in.target) {
      std::memcpy(in.target_buf + in.offset, chunk + kChunkHeaderBytes, length);
    } else if (in.stash) {
      std::memcpy(in.stash->data.data() + in.offset, chunk + kChunkHeaderBytes, length);
    }
  }
  in.offset += length;
  if (in.offset < in.bytes) return true;
  if (in.target) {
    in.target->received = in.bytes;
    --pending_;
    finish(*in.target, Op::State::done);
  }
  if (in.stash) in.stash->complete = true;
  in.active = false;
  return true;
}

bool P2pRings::pull(Inbox& in) {
  const uint64_t head = in.ring.head->load(std::memory_order_acquire);
  const uint64_t chunks = static_cast<uint64_t>(shape_.chunks);
  bool moved = false;
  auto chunk_at = [&](uint64_t index) { return in.ring.chunks + (index % chunks) * (kChunkHeaderBytes + shape_.chunk_bytes); };
  while (in.tail != head) {
    if (!take_chunk(in, chunk_at(in.tail))) {
      // The message waits for its receive. If its sender cancelled it, the marker is the very
      // next chunk (push() writes nothing else behind a waiting first chunk): drop both.
      ChunkHeader next;
      if (in.tail + 1 == head) break;
      std::memcpy(&next, chunk_at(in.tail + 1), sizeof(next));
      if (next.kind != kCancelled) break;
      in.tail += 2;
      in.ring.tail->store(in.tail, std::memory_order_release);
      moved = true;
      continue;
    }
    in.ring.tail->store(++in.tail, std::memory_order_release);
    moved = true;
  }
  return moved;
}

bool P2pRings::progress() {
  std::lock_guard<std::mutex> lock(mutex_);
  bool moved = false;
  // Receive first: it frees ring room for the peer's next chunks while ours are written.
  for (auto& in : in_) {
    if (in) moved = pull(*in) || moved;
  }
  for (auto& out : out_) {
    if (out && (out->owe_cancel_marker || !out->queue.empty())) moved = push(*out) || moved;
  }
  return moved;
}

bool P2pRings::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_ != 0;
}

std::string P2pRings::describe() const {
  return format("weft shared-memory rings to %zu local peers (%d x %zu KiB chunks per pair)", local_.size() - 1,
                shape_.chunks, shape_.chunk_bytes / 1024);
}

}  // namespace weft::shm
