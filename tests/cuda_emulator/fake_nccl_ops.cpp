// The stand-in NCCL's operations: see fake_nccl_ops.h.
#include "tests/cuda_emulator/fake_nccl_ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tests/cuda_emulator/emulator.h"
#include "tests/cuda_emulator/fake_nccl_reduce.h"
#include "tests/cuda_emulator/fake_nccl_support.h"

namespace weft::fake_nccl {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::allreduce: return "AllReduce";
    case Kind::broadcast: return "Broadcast";
    case Kind::reduce: return "Reduce";
    case Kind::allgather: return "AllGather";
    case Kind::reducescatter: return "ReduceScatter";
    case Kind::send: return "Send";
    case Kind::recv: return "Recv";
  }
  return "?";
}

namespace {

// What every rank writes first in a collective's file: ranks that disagree are reported.
struct Header {
  uint32_t magic, kind, type, op;
  int32_t root, pad;
  uint64_t count;
  bool operator==(const Header&) const = default;
};

Header header_of(const Op& o) {
  const bool reduces = o.kind == Kind::allreduce || o.kind == Kind::reduce || o.kind == Kind::reducescatter;
  const bool rooted = o.kind == Kind::broadcast || o.kind == Kind::reduce;
  return {kFileMagic, static_cast<uint32_t>(o.kind), static_cast<uint32_t>(o.type),
          reduces ? static_cast<uint32_t>(o.op) : 0u, rooted ? o.root : -1, 0, o.count};
}

// Bytes rank r contributes to collective o.
size_t contribution(const Op& o, int r, int nranks) {
  const size_t bytes = o.count * type_size(o.type);
  switch (o.kind) {
    case Kind::reducescatter: return bytes * static_cast<size_t>(nranks);
    case Kind::broadcast: return r == o.root ? bytes : 0;
    default: return bytes;
  }
}

// A peer's file, opened once it exists and checked against this rank's header.
struct PeerFile {
  int fd = -1;
  ~PeerFile() {
    if (fd >= 0) close(fd);
  }
};

// One collective, run on the stream worker: publish, wait for every rank, compute.
// Returns false when aborted or failed (the failure is recorded in async_error).
bool run_collective(State& st, const Op& o) {
  const int n = st.nranks, me = st.rank;
  const size_t esz = type_size(o.type), bytes = o.count * esz;
  const Header mine = header_of(o);
  const size_t give = contribution(o, me, n);
  const void* src = give ? weft::emu::host_view(o.send, give) : nullptr;
  const std::string tag = "c" + std::to_string(o.seq);
  if (!publish(st.dir, tag + "." + std::to_string(me), &mine, sizeof mine, src, give)) {
    fail(ncclSystemError, "%s #%llu: cannot write to %s: %s", kind_name(o.kind),
         static_cast<unsigned long long>(o.seq), st.dir.c_str(), std::strerror(errno));
    st.set_error(ncclSystemError);
    return false;
  }
  std::vector<PeerFile> files(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    const std::string p = st.path(tag + "." + std::to_string(q));
    if (!wait_until(st.aborted, nullptr, [&] { return exists(p); })) return false;
    PeerFile& f = files[static_cast<size_t>(q)];
    f.fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    Header h{};
    struct stat sb{};
    if (f.fd < 0 || !read_all(f.fd, &h, sizeof h, 0) || fstat(f.fd, &sb) != 0) {
      fail(ncclSystemError, "%s #%llu: cannot read %s", kind_name(o.kind), static_cast<unsigned long long>(o.seq),
           p.c_str());
      st.set_error(ncclSystemError);
      return false;
    }
    if (!(h == mine) || static_cast<size_t>(sb.st_size) != sizeof h + contribution(o, q, n)) {
      fail(ncclInvalidUsage,
           "collective #%llu: %s called %s(count %llu, type %u, op %u, root %d) but rank %d called "
           "%s(count %llu, type %u, op %u, root %d): every rank must call the same collectives in the same order",
           static_cast<unsigned long long>(o.seq), st.peer_text(me).c_str(), kind_name(o.kind),
           static_cast<unsigned long long>(o.count), mine.type, mine.op, mine.root, q,
           kind_name(static_cast<Kind>(h.kind)), static_cast<unsigned long long>(h.count), h.type, h.op, h.root);
      st.set_error(ncclInvalidUsage);
      return false;
    }
  }
  // Reads `len` bytes of rank q's contribution from offset `at`.
  auto read_from = [&](int q, void* dst, size_t len, size_t at) {
    if (read_all(files[static_cast<size_t>(q)].fd, dst, len, static_cast<off_t>(sizeof(Header) + at))) return true;
    fail(ncclSystemError, "%s #%llu: short read from rank %d", kind_name(o.kind),
         static_cast<unsigned long long>(o.seq), q);
    st.set_error(ncclSystemError);
    return false;
  };
  // Reduces block `at` of every rank's contribution, in rank order, into `out`.
  auto reduce_all = [&](void* out, size_t at) {
    std::vector<char> acc(bytes), x(bytes);
    const bool avg = o.op == ncclAvg, pre = avg && is_float(o.type);
    const ncclRedOp_t op = avg ? ncclSum : o.op;
    for (int q = 0; q < n; ++q) {
      if (!read_from(q, q == 0 ? acc.data() : x.data(), bytes, at)) return false;
      if (pre) premultiply(q == 0 ? acc.data() : x.data(), o.count, o.type, n);
      if (q > 0) reduce_into(acc.data(), x.data(), o.count, o.type, op);
    }
    if (avg && !pre) postdivide(acc.data(), o.count, o.type, n);
    std::memcpy(out, acc.data(), bytes);
    return true;
  };
  bool ok = true;
  switch (o.kind) {
    case Kind::allreduce: ok = reduce_all(weft::emu::host_view(o.recv, bytes), 0); break;
    case Kind::reduce:
      if (me == o.root) ok = reduce_all(weft::emu::host_view(o.recv, bytes), 0);
      break;
    case Kind::reducescatter: ok = reduce_all(weft::emu::host_view(o.recv, bytes), bytes * static_cast<size_t>(me)); break;
    case Kind::broadcast: ok = read_from(o.root, weft::emu::host_view(o.recv, bytes), bytes, 0); break;
    case Kind::allgather: {
      char* out = static_cast<char*>(weft::emu::host_view(o.recv, bytes * static_cast<size_t>(n)));
      for (int q = 0; q < n && ok; ++q) ok = read_from(q, out + bytes * static_cast<size_t>(q), bytes, 0);
      break;
    }
    default: break;
  }
  // Every rank has finished collective seq-1 (it wrote c<seq>): its file of ours is read.
  if (o.seq > 0) unlink(st.path("c" + std::to_string(o.seq - 1) + "." + std::to_string(me)).c_str());
  return ok;
}

std::string p2p_name(int src, int dst, uint64_t seq) {
  return "p" + std::to_string(src) + "." + std::to_string(dst) + "." + std::to_string(seq);
}

bool post_send(State& st, const Op& o) {
  const size_t bytes = o.count * type_size(o.type);
  const Header h = header_of(o);
  const void* src = bytes ? weft::emu::host_view(o.send, bytes) : nullptr;
  if (publish(st.dir, p2p_name(st.rank, o.root, o.seq), &h, sizeof h, src, bytes)) return true;
  fail(ncclSystemError, "Send to rank %d: cannot write to %s: %s", o.root, st.dir.c_str(), std::strerror(errno));
  st.set_error(ncclSystemError);
  return false;
}

bool run_recv(State& st, const Op& o) {
  const size_t bytes = o.count * type_size(o.type);
  const std::string p = st.path(p2p_name(o.root, st.rank, o.seq));
  if (!wait_until(st.aborted, nullptr, [&] { return exists(p); })) return false;
  PeerFile f;
  f.fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
  Header h{};
  struct stat sb{};
  if (f.fd < 0 || !read_all(f.fd, &h, sizeof h, 0) || fstat(f.fd, &sb) != 0) {
    fail(ncclSystemError, "Recv from rank %d: cannot read %s", o.root, p.c_str());
    st.set_error(ncclSystemError);
    return false;
  }
  const size_t sent = static_cast<size_t>(sb.st_size) - sizeof h;
  if (sent != bytes) {
    fail(ncclInvalidUsage, "Recv #%llu from rank %d: %s posted %zu bytes, rank %d sent %zu",
         static_cast<unsigned long long>(o.seq), o.root, st.peer_text(st.rank).c_str(), bytes, o.root, sent);
    st.set_error(ncclInvalidUsage);
    return false;
  }
  if (bytes && !read_all(f.fd, weft::emu::host_view(o.recv, bytes), bytes, sizeof h)) {
    fail(ncclSystemError, "Recv from rank %d: short read", o.root);
    st.set_error(ncclSystemError);
    return false;
  }
  unlink(p.c_str());  // completes the peer's send
  return true;
}

// A send is complete once the receiver has taken (deleted) its file, as an NCCL send occupies
// its stream until the peer receives.
bool finish_send(State& st, const Op& o) {
  const std::string p = st.path(p2p_name(st.rank, o.root, o.seq));
  return wait_until(st.aborted, nullptr, [&] { return !exists(p); });
}

}  // namespace

void execute(const Unit& u) {
  State& st = *u.st;
  // NCCL serialises a communicator's work: wait for the previous unit (or a failure).
  wait_until(st.aborted, nullptr, [&] { return st.units_done.load() == u.seq || st.async_error.load() != ncclSuccess; });
  if (!st.aborted.load() && st.async_error.load() == ncclSuccess) {
    // Sends are posted first and receives taken last, so the ops of a group progress together
    // as they do in NCCL's one grouped kernel.
    bool ok = true;
    for (const Op& o : u.ops) {
      if (ok && o.kind == Kind::send) ok = post_send(st, o);
    }
    for (const Op& o : u.ops) {
      if (ok && o.kind != Kind::send && o.kind != Kind::recv) ok = run_collective(st, o);
    }
    for (const Op& o : u.ops) {
      if (ok && o.kind == Kind::recv) ok = run_recv(st, o);
    }
    for (const Op& o : u.ops) {
      if (ok && o.kind == Kind::send) ok = finish_send(st, o);
    }
  }
  st.units_done.fetch_add(1);
}

}  // namespace weft::fake_nccl
