// Random operations and their reference. Data are int32 values computed from (seq, rank,
// index), so the reference for any rank's result is a closed formula over the contributing
// ranks: no communication, no shared state. SUM wraps modulo 2^32 (weft.h's integer rule).
#include "random_ops.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace faults {
namespace {

int32_t val(uint64_t seq, int r, size_t i) {
  uint32_t h = static_cast<uint32_t>(seq * 0x9E3779B1u) ^ (static_cast<uint32_t>(r) * 0x85EBCA77u);
  return static_cast<int32_t>(h + static_cast<uint32_t>(i) * 0xC2B2AE3Du);
}

int32_t reduce_ref(const Spec& s, int n, size_t i) {
  uint32_t sum = 0;
  int32_t mx = val(s.seq, 0, i);
  for (int r = 0; r < n; ++r) {
    sum += static_cast<uint32_t>(val(s.seq, r, i));
    mx = std::max(mx, val(s.seq, r, i));
  }
  return s.op == WEFT_SUM ? static_cast<int32_t>(sum) : mx;
}

// alltoallv: elements rank a sends to rank b, and where they start in a's send buffer.
size_t vcount(size_t c, int n, int a, int b) { return c * static_cast<size_t>((a + 2 * b) % n + 1) / n; }
size_t vsdispl(size_t c, int n, int a, int b) {
  size_t d = 0;
  for (int j = 0; j < b; ++j) d += vcount(c, n, a, j);
  return d;
}

// One operation's buffers, arrays and requests; lives until its results are checked.
struct Prepared {
  Spec s;
  std::vector<int32_t> send, recv, self_recv;
  std::vector<size_t> a, b, c, d;  // counts and displacements
  std::vector<weft_p2p_op_t> ops;
  std::vector<weft_request_t> reqs;
  int partner = -1;
};

void fill(std::vector<int32_t>& v, uint64_t seq, int r, size_t offset = 0) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = val(seq, r, offset + i);
}

weft_request_t* next_req(Prepared& p, bool async) {
  if (!async) return nullptr;
  p.reqs.push_back(nullptr);
  return &p.reqs.back();
}

weft_status_t issue(Prepared& p, weft_comm_t comm, int me, int n, bool async) {
  const Spec& s = p.s;
  const size_t c = s.count;
  const size_t nc = c * static_cast<size_t>(n);
  p.reqs.reserve(4);  // next_req hands out pointers into it
  switch (s.kind) {
    case Kind::allreduce:
      p.send.resize(c);
      fill(p.send, s.seq, me);
      p.recv.assign(c, -1);
      if (s.in_place) p.recv = p.send;
      return weft_allreduce(s.in_place ? p.recv.data() : p.send.data(), p.recv.data(), c, WEFT_INT32, s.op, comm,
                            nullptr, next_req(p, async));
    case Kind::broadcast:
      p.recv.assign(c, 0);
      if (me == s.root) fill(p.recv, s.seq, me);
      return weft_broadcast(p.recv.data(), c, WEFT_INT32, s.root, comm, nullptr, next_req(p, async));
    case Kind::reduce:
      p.send.resize(c);
      fill(p.send, s.seq, me);
      p.recv.assign(me == s.root ? c : 0, -1);
      return weft_reduce(p.send.data(), me == s.root ? p.recv.data() : nullptr, c, WEFT_INT32, s.op, s.root, comm,
                         nullptr, next_req(p, async));
    case Kind::allgather: {
      p.recv.assign(nc, -1);
      if (s.in_place) {
        for (size_t i = 0; i < c; ++i) p.recv[me * c + i] = val(s.seq, me, i);
        return weft_allgather(p.recv.data() + me * c, p.recv.data(), c, WEFT_INT32, comm, nullptr, next_req(p, async));
      }
      p.send.resize(c);
      fill(p.send, s.seq, me);
      return weft_allgather(p.send.data(), p.recv.data(), c, WEFT_INT32, comm, nullptr, next_req(p, async));
    }
    case Kind::allgatherv: {
      size_t total = 0;
      for (int r = 0; r < n; ++r) {
        p.a.push_back(c * static_cast<size_t>(r + 1) / n);
        p.b.push_back(total);
        total += p.a.back();
      }
      p.send.resize(p.a[me]);
      fill(p.send, s.seq, me);
      p.recv.assign(total, -1);
      return weft_allgatherv(p.send.data(), p.send.size(), p.recv.data(), p.a.data(), p.b.data(), WEFT_INT32, comm,
                             nullptr, next_req(p, async));
    }
    case Kind::reduce_scatter:
      p.send.resize(nc);
      fill(p.send, s.seq, me);
      p.recv.assign(c, -1);
      return weft_reduce_scatter(p.send.data(), p.recv.data(), c, WEFT_INT32, s.op, comm, nullptr, next_req(p, async));
    case Kind::alltoall:
      p.send.resize(nc);
      fill(p.send, s.seq, me);
      p.recv.assign(nc, -1);
      return weft_alltoall(p.send.data(), p.recv.data(), c, WEFT_INT32, comm, nullptr, next_req(p, async));
    case Kind::alltoallv: {
      size_t stotal = 0, rtotal = 0;
      for (int j = 0; j < n; ++j) {
        p.a.push_back(vcount(c, n, me, j));
        p.b.push_back(stotal);
        stotal += p.a.back();
        p.c.push_back(vcount(c, n, j, me));
        p.d.push_back(rtotal);
        rtotal += p.c.back();
      }
      p.send.resize(stotal);
      fill(p.send, s.seq, me);
      p.recv.assign(rtotal, -1);
      return weft_alltoallv(p.send.data(), p.a.data(), p.b.data(), p.recv.data(), p.c.data(), p.d.data(), WEFT_INT32,
                            comm, nullptr, next_req(p, async));
    }
    case Kind::gather:
      p.send.resize(c);
      fill(p.send, s.seq, me);
      p.recv.assign(me == s.root ? nc : 0, -1);
      return weft_gather(p.send.data(), me == s.root ? p.recv.data() : nullptr, c, WEFT_INT32, s.root, comm, nullptr,
                         next_req(p, async));
    case Kind::scatter:
      if (me == s.root) {
        p.send.resize(nc);
        fill(p.send, s.seq, me);
      }
      p.recv.assign(c, -1);
      return weft_scatter(me == s.root ? p.send.data() : nullptr, p.recv.data(), c, WEFT_INT32, s.root, comm, nullptr,
                          next_req(p, async));
    case Kind::barrier:
      return weft_barrier(comm, nullptr, next_req(p, async));
    case Kind::sendrecv: {
      // Pairs (0,1), (2,3)...: the even rank sends first, so blocking calls cannot deadlock.
      p.partner = me ^ 1;
      if (p.partner >= n) return WEFT_OK;
      p.send.resize(c);
      fill(p.send, s.seq, me);
      p.recv.assign(c, -1);
      weft_status_t st;
      if (me % 2 == 0) {
        st = weft_send(p.send.data(), c, WEFT_INT32, p.partner, comm, nullptr, next_req(p, async));
        if (st != WEFT_OK) return st;
        return weft_recv(p.recv.data(), c, WEFT_INT32, p.partner, comm, nullptr, next_req(p, async));
      }
      st = weft_recv(p.recv.data(), c, WEFT_INT32, p.partner, comm, nullptr, next_req(p, async));
      if (st != WEFT_OK) return st;
      return weft_send(p.send.data(), c, WEFT_INT32, p.partner, comm, nullptr, next_req(p, async));
    }
    case Kind::p2p_batch: {
      // A ring shift plus a message to itself: the shape of a pipeline or halo exchange.
      const int right = (me + 1) % n, left = (me + n - 1) % n;
      p.send.resize(c + c / 2);
      for (size_t i = 0; i < c; ++i) p.send[i] = val(s.seq, me, i);
      for (size_t i = 0; i < c / 2; ++i) p.send[c + i] = val(s.seq + 7777, me, i);
      p.recv.assign(c, -1);
      p.self_recv.assign(c / 2, -1);
      p.ops = {{WEFT_P2P_SEND, p.send.data(), c, WEFT_INT32, right},
               {WEFT_P2P_RECV, p.recv.data(), c, WEFT_INT32, left},
               {WEFT_P2P_SEND, p.send.data() + c, c / 2, WEFT_INT32, me},
               {WEFT_P2P_RECV, p.self_recv.data(), c / 2, WEFT_INT32, me}};
      return weft_p2p_batch(p.ops.data(), p.ops.size(), comm, nullptr, next_req(p, async));
    }
    case Kind::count_:
      break;
  }
  return WEFT_ERR_INVALID_ARGUMENT;
}

// Index of the first element that differs from the reference, or -1.
long first_wrong(const Prepared& p, int me, int n) {
  const Spec& s = p.s;
  const size_t c = s.count;
  auto at = [&](size_t i, int32_t want) { return p.recv[i] != want; };
  switch (s.kind) {
    case Kind::allreduce:
      for (size_t i = 0; i < c; ++i) if (at(i, reduce_ref(s, n, i))) return static_cast<long>(i);
      return -1;
    case Kind::broadcast:
      for (size_t i = 0; i < c; ++i) if (at(i, val(s.seq, s.root, i))) return static_cast<long>(i);
      return -1;
    case Kind::reduce:
      if (me != s.root) return -1;
      for (size_t i = 0; i < c; ++i) if (at(i, reduce_ref(s, n, i))) return static_cast<long>(i);
      return -1;
    case Kind::allgather:
    case Kind::gather:
      if (s.kind == Kind::gather && me != s.root) return -1;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) if (at(r * c + i, val(s.seq, r, i))) return static_cast<long>(r * c + i);
      return -1;
    case Kind::allgatherv:
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < p.a[r]; ++i) if (at(p.b[r] + i, val(s.seq, r, i))) return static_cast<long>(p.b[r] + i);
      return -1;
    case Kind::reduce_scatter:
      for (size_t i = 0; i < c; ++i) if (at(i, reduce_ref(s, n, me * c + i))) return static_cast<long>(i);
      return -1;
    case Kind::alltoall:
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) if (at(r * c + i, val(s.seq, r, me * c + i))) return static_cast<long>(r * c + i);
      return -1;
    case Kind::alltoallv:
      for (int r = 0; r < n; ++r) {
        const size_t from = vsdispl(c, n, r, me);
        for (size_t i = 0; i < p.c[r]; ++i) if (at(p.d[r] + i, val(s.seq, r, from + i))) return static_cast<long>(p.d[r] + i);
      }
      return -1;
    case Kind::scatter:
      for (size_t i = 0; i < c; ++i) if (at(i, val(s.seq, s.root, me * c + i))) return static_cast<long>(i);
      return -1;
    case Kind::barrier:
      return -1;
    case Kind::sendrecv:
      if (p.partner >= n) return -1;
      for (size_t i = 0; i < c; ++i) if (at(i, val(s.seq, p.partner, i))) return static_cast<long>(i);
      return -1;
    case Kind::p2p_batch: {
      const int left = (me + n - 1) % n;
      for (size_t i = 0; i < c; ++i) if (at(i, val(s.seq, left, i))) return static_cast<long>(i);
      for (size_t i = 0; i < c / 2; ++i)
        if (p.self_recv[i] != val(s.seq + 7777, me, i)) return static_cast<long>(c + i);
      return -1;
    }
    case Kind::count_:
      break;
  }
  return 0;
}

long g_injected = 0, g_caught = 0;

bool inject_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("WEFT_TEST_INJECT");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

Outcome failed(weft_status_t st, const char* op, double t0) {
  Outcome o;
  o.status = st;
  o.message = weft_last_error();
  o.op = op;
  o.op_ms = now_ms() - t0;
  return o;
}

}  // namespace

const char* kind_name(Kind k) {
  static const char* const names[] = {"allreduce", "broadcast", "reduce",   "allgather", "allgatherv",
                                      "reduce_scatter", "alltoall", "alltoallv", "gather", "scatter",
                                      "barrier", "sendrecv", "p2p_batch"};
  return k < Kind::count_ ? names[static_cast<int>(k)] : "?";
}

Spec draw_spec(Rng& rng, int nranks, size_t max_bytes, bool skew_small, uint64_t seq) {
  Spec s;
  s.kind = static_cast<Kind>(rng.below(static_cast<int>(Kind::count_)));
  s.seq = seq;
  s.root = rng.below(nranks);
  s.op = rng.below(4) == 0 ? WEFT_MAX : WEFT_SUM;
  s.in_place = rng.below(3) == 0;
  // 1 in 16 operations is empty; the rest log-uniform from 4 bytes to max_bytes.
  size_t bytes = 0;
  if (rng.below(16) != 0) {
    const double u = skew_small ? std::pow(rng.uniform(), 1.5) : rng.uniform();
    bytes = static_cast<size_t>(std::exp2(2.0 + u * (std::log2(static_cast<double>(max_bytes)) - 2.0)));
  }
  s.count = bytes / 4;
  // Operations whose buffers hold one block per rank keep their total within max_bytes.
  switch (s.kind) {
    case Kind::allgather: case Kind::reduce_scatter: case Kind::alltoall: case Kind::gather: case Kind::scatter:
      s.count /= static_cast<size_t>(nranks);
      break;
    default:
      break;
  }
  return s;
}

Outcome run_batch(weft_comm_t comm, const Spec* specs, int nspecs, bool async, bool verify) {
  int me = 0, n = 1;
  weft_comm_rank(comm, &me);
  weft_comm_size(comm, &n);
  auto owned = std::make_shared<std::vector<Prepared>>(static_cast<size_t>(nspecs));
  std::vector<Prepared>& ps = *owned;
  const double t0 = now_ms();
  Outcome bad;
  int issued = 0;
  for (; issued < nspecs; ++issued) {
    ps[issued].s = specs[issued];
    weft_status_t st = issue(ps[issued], comm, me, n, async);
    if (st != WEFT_OK) {
      bad = failed(st, kind_name(specs[issued].kind), t0);
      break;
    }
  }
  for (int k = 0; k < issued; ++k) {
    for (weft_request_t& r : ps[k].reqs) {
      if (bad.status != WEFT_OK) {
        bad.pending.push_back(r);
        continue;
      }
      weft_status_t st = weft_wait(r);
      if (st != WEFT_OK) {
        bad = failed(st, kind_name(ps[k].s.kind), t0);
        bad.pending.push_back(r);
        continue;
      }
      weft_request_free(r);
    }
  }
  if (!bad.pending.empty()) bad.buffers = owned;
  if (bad.status != WEFT_OK || !verify) return bad;
  for (Prepared& p : ps) {
    if (inject_enabled() && !p.recv.empty()) {
      // Injection proof: a corrupted element of a right result must be reported.
      const size_t at = static_cast<size_t>(p.s.seq) % p.recv.size();
      p.recv[at] ^= 0x10;
      ++g_injected;
      if (first_wrong(p, me, n) >= 0) ++g_caught;
      p.recv[at] ^= 0x10;
    }
    if (long i = first_wrong(p, me, n); i >= 0) {
      bad.wrong_data = true;
      bad.op = kind_name(p.s.kind);
      char text[160];
      std::snprintf(text, sizeof text, "%s count %zu root %d seq %llu: element %ld differs from the reference",
                    kind_name(p.s.kind), p.s.count, p.s.root, static_cast<unsigned long long>(p.s.seq), i);
      bad.message = text;
      return bad;
    }
  }
  return bad;
}

Outcome split_and_use(weft_comm_t comm, uint64_t seq, bool leak) {
  int me = 0;
  weft_comm_rank(comm, &me);
  const double t0 = now_ms();
  weft_comm_t sub = nullptr;
  weft_status_t st = weft_comm_split(comm, me % 2, -me, &sub, nullptr);
  if (st != WEFT_OK) return failed(st, "comm_split", t0);
  Spec s;
  s.kind = Kind::allreduce;
  s.count = 1000 + seq % 1000;
  s.seq = seq;
  Outcome o = run_batch(sub, &s, 1, false, true);
  if (o.status == WEFT_OK && !o.wrong_data) {
    // Hand the new communicator a p2p batch too: its own message space must match up.
    s.kind = Kind::p2p_batch;
    o = run_batch(sub, &s, 1, true, true);
  }
  if (o.status != WEFT_OK || o.wrong_data) {
    o.sub = sub;
    return o;
  }
  if (!leak) {
    weft_status_t sd = weft_comm_destroy(sub);
    if (sd != WEFT_OK) return failed(sd, "comm_destroy", t0);
  }
  return o;
}

bool inject_report(long* injected, long* caught) {
  *injected = g_injected;
  *caught = g_caught;
  return inject_enabled();
}

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

int64_t wall_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace faults
