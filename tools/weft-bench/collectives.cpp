#include "collectives.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "redistribution.h"

namespace weftbench {

void check(weft_status_t st, const char* what) {
  if (st == WEFT_OK) return;
  throw WeftError(std::string(what) + " failed: " + weft_status_string(st) + "\n  " + weft_last_error());
}

Shape shape_of(Coll c, size_t requested_bytes, size_t elem_size, int nranks) {
  if (is_redistribution(c)) return redist_shape(c, requested_bytes, elem_size, nranks);
  const size_t n = static_cast<size_t>(nranks);
  const size_t total = requested_bytes / elem_size;
  Shape s;
  switch (c) {
    case Coll::allreduce:
    case Coll::broadcast:
    case Coll::reduce:
    case Coll::sendrecv:
      s.sendcount = s.recvcount = s.paramcount = s.count = total;
      break;
    case Coll::allgather:  // send one block, receive n
      s.paramcount = total / n;
      s.sendcount = s.paramcount;
      s.recvcount = s.count = s.paramcount * n;
      break;
    case Coll::reduce_scatter:  // send n blocks, receive one
      s.paramcount = total / n;
      s.sendcount = s.count = s.paramcount * n;
      s.recvcount = s.paramcount;
      break;
    case Coll::alltoall:  // n blocks each way
      s.paramcount = total / n;
      s.sendcount = s.recvcount = s.count = s.paramcount * n;
      break;
    case Coll::redist_s2r:
    case Coll::redist_p2s:
    case Coll::redist_s0s1:
      break;  // above
  }
  s.bytes = s.count * elem_size;
  return s;
}

double bus_factor(Coll c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Coll::allreduce: return 2.0 * (n - 1) / n;
    case Coll::allgather:
    case Coll::reduce_scatter:
    case Coll::alltoall:
    case Coll::redist_s2r:
    case Coll::redist_p2s:
    case Coll::redist_s0s1: return (n - 1) / n;
    case Coll::broadcast:
    case Coll::reduce:
    case Coll::sendrecv: return 1.0;
  }
  return 1.0;
}

bool is_reduction(Coll c) {
  return c == Coll::allreduce || c == Coll::reduce_scatter || c == Coll::reduce || c == Coll::redist_p2s;
}
bool is_rooted(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }
bool has_inplace(Coll c) { return c != Coll::sendrecv && !is_redistribution(c); }
bool is_redistribution(Coll c) {
  return c == Coll::redist_s2r || c == Coll::redist_p2s || c == Coll::redist_s0s1;
}

void HostBuffer::Free::operator()(char* p) const { std::free(p); }

HostBuffer::HostBuffer(size_t bytes) {
  constexpr size_t kPage = 4096;
  const size_t rounded = std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
  char* p = static_cast<char*>(std::aligned_alloc(kPage, rounded));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  ptr_.reset(p);
  size_ = rounded;
}

Case::Case(const Comm& comm, Coll c, const DtypeInfo& t, weft_op_t op, int root, size_t max_bytes)
    : Bench(c, t), comm_(comm), op_(op), root_(root) {
  const int64_t per_rank = t.max_exact_int / std::max(1, comm.nranks);
  sum_range_ = std::max<int64_t>(2, std::min<int64_t>(8, per_rank));
  pattern_range_ = std::min<int64_t>(t.max_exact_int, int64_t{1} << 20) + 1;
  const Shape big = shape_of(c, max_bytes, t.size, comm.nranks);
  send_ = HostBuffer(big.sendcount * t.size);
  recv_ = HostBuffer(big.recvcount * t.size);
}

void Case::send_recv_ptrs(const Shape& shape, bool inplace, void** send, void** recv) const {
  char* S = send_.data();
  char* R = recv_.data();
  const size_t self = static_cast<size_t>(comm_.rank);
  *send = S;
  *recv = R;
  if (!inplace) return;
  switch (coll_) {
    case Coll::allreduce:
    case Coll::reduce:
    case Coll::alltoall:
    case Coll::broadcast:
      *send = R;
      break;
    case Coll::allgather:  // this rank's block sits at its place in the result
      *send = elem(R, self * shape.paramcount);
      break;
    case Coll::reduce_scatter:  // the result lands on this rank's block of the input
      *recv = elem(S, self * shape.paramcount);
      break;
    case Coll::sendrecv:
    case Coll::redist_s2r:  // RedistCase's, never a Case
    case Coll::redist_p2s:
    case Coll::redist_s0s1:
      break;
  }
}

void Case::issue(const Shape& shape, bool inplace, std::vector<weft_request_t>* reqs) {
  void* s;
  void* r;
  send_recv_ptrs(shape, inplace, &s, &r);
  const size_t pc = shape.paramcount;
  weft_comm_t comm = comm_.comm;
  weft_request_t req = nullptr;
  weft_request_t* rq = reqs ? &req : nullptr;
  switch (coll_) {
    case Coll::allreduce:
      check(weft_allreduce(s, r, pc, t_.dtype, op_, comm, nullptr, rq), "weft_allreduce");
      break;
    case Coll::allgather:
      check(weft_allgather(s, r, pc, t_.dtype, comm, nullptr, rq), "weft_allgather");
      break;
    case Coll::reduce_scatter:
      check(weft_reduce_scatter(s, r, pc, t_.dtype, op_, comm, nullptr, rq), "weft_reduce_scatter");
      break;
    case Coll::alltoall:
      check(weft_alltoall(s, r, pc, t_.dtype, comm, nullptr, rq), "weft_alltoall");
      break;
    case Coll::broadcast:
      check(weft_broadcast(comm_.rank == root_ ? s : r, pc, t_.dtype, root_, comm, nullptr, rq),
            "weft_broadcast");
      break;
    case Coll::reduce:
      check(weft_reduce(s, r, pc, t_.dtype, op_, root_, comm, nullptr, rq), "weft_reduce");
      break;
    case Coll::sendrecv: {
      // nccl-tests' pattern: send to the next rank, receive from the previous one.
      const int next = (comm_.rank + 1) % comm_.nranks;
      const int prev = (comm_.rank + comm_.nranks - 1) % comm_.nranks;
      weft_request_t rr = nullptr, sr = nullptr;
      check(weft_recv(r, pc, t_.dtype, prev, comm, nullptr, &rr), "weft_recv");
      check(weft_send(s, pc, t_.dtype, next, comm, nullptr, &sr), "weft_send");
      if (reqs) {
        reqs->push_back(rr);
        reqs->push_back(sr);
      } else {
        weft_status_t a = weft_wait(rr);
        weft_status_t b = weft_wait(sr);
        weft_request_free(rr);
        weft_request_free(sr);
        check(a, "weft_wait(recv)");
        check(b, "weft_wait(send)");
      }
      return;
    }
    case Coll::redist_s2r:  // RedistCase's, never a Case
    case Coll::redist_p2s:
    case Coll::redist_s0s1:
      throw WeftError("weft-bench: a redistribution issued as a plain collective");
  }
  if (reqs) reqs->push_back(req);
}

double Case::input(int r, size_t i) const {
  const size_t ur = static_cast<size_t>(r);
  if (is_reduction(coll_)) {
    switch (op_) {
      case WEFT_SUM:
      case WEFT_AVG:
        return static_cast<double>((ur * 3 + i * 5 + 1) % static_cast<size_t>(sum_range_));
      case WEFT_PROD:  // a few 2s among 1s: products stay powers of two
        return (i + ur) % 5 == 0 ? 2.0 : 1.0;
      default:  // min, max
        break;
    }
    return static_cast<double>((ur * 7 + i * 3 + 1) % static_cast<size_t>(pattern_range_));
  }
  return static_cast<double>((ur * 131 + i * 7 + 3) % static_cast<size_t>(pattern_range_));
}

double Case::reduced(size_t i) const {
  const int n = comm_.nranks;
  if (t_.kind != Kind::floating) {
    int64_t acc = static_cast<int64_t>(input(0, i));
    for (int r = 1; r < n; ++r) {
      const int64_t v = static_cast<int64_t>(input(r, i));
      switch (op_) {
        case WEFT_SUM:
        case WEFT_AVG: acc = wrap_int(t_, static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v))); break;
        case WEFT_PROD: acc = wrap_int(t_, static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v))); break;
        case WEFT_MIN: acc = std::min(acc, v); break;
        case WEFT_MAX: acc = std::max(acc, v); break;
        default: break;
      }
    }
    if (op_ == WEFT_AVG) acc /= n;  // truncates toward zero, as weft.h states
    return static_cast<double>(acc);
  }
  double acc = input(0, i);
  for (int r = 1; r < n; ++r) {
    const double v = input(r, i);
    switch (op_) {
      case WEFT_SUM:
      case WEFT_AVG: acc += v; break;
      case WEFT_PROD: acc *= v; break;
      case WEFT_MIN: acc = std::min(acc, v); break;
      case WEFT_MAX: acc = std::max(acc, v); break;
      default: break;
    }
  }
  if (op_ == WEFT_AVG) acc /= n;
  return round_to(t_, acc);
}

void Case::fill(const Shape& shape, bool inplace) {
  void* s;
  void* r;
  send_recv_ptrs(shape, inplace, &s, &r);
  // Poison what the operation must overwrite: 0xFF bytes are NaN for the floating types and
  // -1 / the maximum for integers, never a value of the input patterns.
  if (!inplace || coll_ == Coll::allgather || (coll_ == Coll::broadcast && comm_.rank != root_))
    std::memset(recv_.data(), 0xFF, shape.recvcount * t_.size);
  if (coll_ == Coll::broadcast) {
    if (comm_.rank == root_)
      for (size_t i = 0; i < shape.paramcount; ++i) store(t_, s, i, input(root_, i));
    return;
  }
  for (size_t i = 0; i < shape.sendcount; ++i) store(t_, s, i, input(comm_.rank, i));
}

size_t Case::count_wrong(const Shape& shape, bool inplace) const {
  void* s;
  void* r;
  send_recv_ptrs(shape, inplace, &s, &r);
  const size_t pc = shape.paramcount;
  const size_t self = static_cast<size_t>(comm_.rank);
  size_t wrong = 0;
  auto expect = [&](const void* buf, size_t j, double want) {
    if (!close_enough(t_, load(t_, buf, j), want)) ++wrong;
  };
  switch (coll_) {
    case Coll::allreduce:
      for (size_t i = 0; i < pc; ++i) expect(r, i, reduced(i));
      break;
    case Coll::reduce:
      if (comm_.rank == root_)
        for (size_t i = 0; i < pc; ++i) expect(r, i, reduced(i));
      break;
    case Coll::broadcast: {
      const void* out = comm_.rank == root_ ? s : r;
      for (size_t i = 0; i < pc; ++i) expect(out, i, input(root_, i));
      break;
    }
    case Coll::allgather:
      for (size_t j = 0; j < shape.recvcount; ++j) expect(r, j, input(static_cast<int>(j / pc), j % pc));
      break;
    case Coll::reduce_scatter:
      for (size_t i = 0; i < pc; ++i) expect(r, i, reduced(self * pc + i));
      break;
    case Coll::alltoall:
      for (size_t j = 0; j < shape.recvcount; ++j)
        expect(r, j, input(static_cast<int>(j / pc), self * pc + j % pc));
      break;
    case Coll::sendrecv: {
      const int prev = (comm_.rank + comm_.nranks - 1) % comm_.nranks;
      for (size_t i = 0; i < pc; ++i) expect(r, i, input(prev, i));
      break;
    }
    case Coll::redist_s2r:  // RedistCase's, never a Case
    case Coll::redist_p2s:
    case Coll::redist_s0s1:
      break;
  }
  return wrong;
}

}  // namespace weftbench
