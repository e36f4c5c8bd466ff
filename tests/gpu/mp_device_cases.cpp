// The collective cases of weft_gpu_mp_device: mp_device_cases.h.
#include "mp_device_cases.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace weft::gputest {
namespace {

using mpt::Input;
using mpt::Source;

constexpr int kMaxRanks = 64;

uint64_t seed_of(const std::string& name, weft_dtype_t dt, Input input) {
  return mpt::hash_str((name + "/" + mpt::dtype_name(dt) + "/" + mpt::input_name(input)).c_str());
}

// Rank `rank`'s input elements [base, base + n) as bytes.
std::vector<uint8_t> input_bytes(const Source& src, int rank, size_t n, uint64_t base = 0) {
  std::vector<uint8_t> v(n * mpt::dtype_bytes(src.dtype()));
  for (size_t i = 0; i < n; ++i) mpt::store_bits(src.dtype(), v.data(), i, src(rank, base + i));
  return v;
}

Want bits(uint64_t b) {
  Want w;
  w.bits = b;
  return w;
}

// The reference reduction over all ranks of element `idx`.
Want reduced(const Source& src, weft_op_t op, int nranks, uint64_t idx) {
  uint64_t vals[kMaxRanks];
  for (int r = 0; r < nranks; ++r) vals[r] = src(r, idx);
  Want w;
  w.reduced = true;
  w.expect = mpt::reduce_reference(src.dtype(), op, vals, nranks);
  return w;
}

// Exact inputs make sums and products exact in any order, and AVG is that sum divided once by n
// on every path (weft.h; the NCCL path does not use ncclAvg), so they are compared exactly.
mpt::Compare compare_for(Input input) {
  return input == Input::random ? mpt::Compare::tolerance : mpt::Compare::exact;
}

}  // namespace

std::vector<DeviceCase> reducing_cases(const World& w, weft_dtype_t dt, size_t n, Input input) {
  if (w.size > kMaxRanks) {
    std::fprintf(stderr, "mp_device: at most %d ranks\n", kMaxRanks);
    std::exit(2);
  }
  const size_t N = static_cast<size_t>(w.size);
  const int nranks = w.size, me = w.rank, root = w.size - 1;
  weft_comm_t comm = w.comm;
  std::vector<DeviceCase> out;
  for (weft_op_t op : {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG}) {
    const std::string o = std::string(" ") + mpt::op_name(op) + ", " + mpt::input_name(input) + " inputs";
    const mpt::Compare cmp = compare_for(input);
    auto source = [&](const char* coll) {
      return std::make_shared<const Source>(dt, op, input, seed_of(coll + o, dt, input), nranks);
    };
    {
      auto src = source("allreduce");
      out.push_back({"allreduce" + o, dt, op, cmp, input_bytes(*src, me, n), n, false,
                     [=](Buffers b, void* s, weft_request_t* r) {
                       return weft_allreduce(b.send, b.recv, n, dt, op, comm, s, r);
                     },
                     [=](size_t i) { return reduced(*src, op, nranks, i); }});
    }
    {
      auto src = source("allreduce in place");
      out.push_back({"allreduce in place" + o, dt, op, cmp, input_bytes(*src, me, n), n, true,
                     [=](Buffers b, void* s, weft_request_t* r) {
                       return weft_allreduce(b.recv, b.recv, n, dt, op, comm, s, r);
                     },
                     [=](size_t i) { return reduced(*src, op, nranks, i); }});
    }
    {
      // The result buffer of a non-root is not written (weft.h: used on the root only).
      auto src = source("reduce");
      out.push_back({"reduce" + o, dt, op, cmp, input_bytes(*src, me, n), n, false,
                     [=](Buffers b, void* s, weft_request_t* r) {
                       return weft_reduce(b.send, b.recv, n, dt, op, root, comm, s, r);
                     },
                     [=](size_t i) { return me == root ? reduced(*src, op, nranks, i) : bits(0); }});
    }
    {
      auto src = source("reduce_scatter");
      out.push_back({"reduce_scatter" + o, dt, op, cmp, input_bytes(*src, me, n * N), n, false,
                     [=](Buffers b, void* s, weft_request_t* r) {
                       return weft_reduce_scatter(b.send, b.recv, n, dt, op, comm, s, r);
                     },
                     [=](size_t i) { return reduced(*src, op, nranks, static_cast<uint64_t>(me) * n + i); }});
    }
  }
  return out;
}

std::vector<DeviceCase> moving_cases(const World& w, weft_dtype_t dt, size_t n) {
  const size_t N = static_cast<size_t>(w.size);
  const int nranks = w.size, me = w.rank, root = w.size - 1;
  weft_comm_t comm = w.comm;
  auto source = [&](const char* coll) {
    return std::make_shared<const Source>(dt, WEFT_SUM, Input::raw, seed_of(coll, dt, Input::raw), nranks);
  };
  const mpt::Compare exact = mpt::Compare::exact;
  std::vector<DeviceCase> out;
  {
    const int from = 1 % nranks;
    auto src = source("broadcast");
    out.push_back({"broadcast", dt, WEFT_SUM, exact, input_bytes(*src, me, n), n, true,
                   [=](Buffers b, void* s, weft_request_t* r) { return weft_broadcast(b.recv, n, dt, from, comm, s, r); },
                   [=](size_t i) { return bits((*src)(from, i)); }});
  }
  {
    auto src = source("allgather");
    out.push_back({"allgather", dt, WEFT_SUM, exact, input_bytes(*src, me, n), n * N, false,
                   [=](Buffers b, void* s, weft_request_t* r) { return weft_allgather(b.send, b.recv, n, dt, comm, s, r); },
                   [=](size_t k) { return n ? bits((*src)(static_cast<int>(k / n), k % n)) : bits(0); }});
  }
  for (bool in_place : {false, true}) {
    // Block d of rank s (its elements d*n..) goes to rank d: rank me receives src(s, me*n + i).
    auto src = source(in_place ? "alltoall in place" : "alltoall");
    out.push_back({in_place ? "alltoall in place" : "alltoall", dt, WEFT_SUM, exact, input_bytes(*src, me, n * N),
                   n * N, in_place,
                   [=](Buffers b, void* s, weft_request_t* r) {
                     return weft_alltoall(in_place ? b.recv : b.send, b.recv, n, dt, comm, s, r);
                   },
                   [=](size_t k) {
                     return n ? bits((*src)(static_cast<int>(k / n), static_cast<uint64_t>(me) * n + k % n)) : bits(0);
                   }});
  }
  {
    auto src = source("gather");
    out.push_back({"gather", dt, WEFT_SUM, exact, input_bytes(*src, me, n), n * N, false,
                   [=](Buffers b, void* s, weft_request_t* r) { return weft_gather(b.send, b.recv, n, dt, root, comm, s, r); },
                   [=](size_t k) {
                     return me == root && n ? bits((*src)(static_cast<int>(k / n), k % n)) : bits(0);
                   }});
  }
  {
    auto src = source("scatter");
    out.push_back({"scatter", dt, WEFT_SUM, exact, input_bytes(*src, me, n * N), n, false,
                   [=](Buffers b, void* s, weft_request_t* r) { return weft_scatter(b.send, b.recv, n, dt, root, comm, s, r); },
                   [=](size_t i) { return bits((*src)(root, static_cast<uint64_t>(me) * n + i)); }});
  }
  // Uneven counts: rank q sends (q + 2p) % 3 * (n / 2) + 1 elements to rank p (all ranks agree).
  auto count = [n](int from, int to) { return static_cast<size_t>((from + 2 * to) % 3) * (n / 2) + (n ? 1 : 0); };
  {
    // allgatherv: rank p contributes count(p, 0) elements, placed in rank order.
    std::vector<size_t> counts(N), displs(N);
    size_t total = 0;
    for (size_t p = 0; p < N; ++p) {
      counts[p] = count(static_cast<int>(p), 0);
      displs[p] = total;
      total += counts[p];
    }
    const size_t mine = counts[static_cast<size_t>(me)];
    auto src = source("allgatherv");
    out.push_back({"allgatherv", dt, WEFT_SUM, exact, input_bytes(*src, me, mine), total, false,
                   [=](Buffers b, void* s, weft_request_t* r) {
                     return weft_allgatherv(b.send, mine, b.recv, counts.data(), displs.data(), dt, comm, s, r);
                   },
                   [=](size_t k) {
                     size_t p = 0;
                     while (k >= displs[p] + counts[p]) ++p;
                     return bits((*src)(static_cast<int>(p), k - displs[p]));
                   }});
  }
  {
    // alltoallv: rank q's input elements are src(q, 0..), its block for rank p starting at
    // element sum_{k<p} count(q, k); blocks arrive in rank order.
    auto send_displ = [&](int q, int p) {
      size_t d = 0;
      for (int k = 0; k < p; ++k) d += count(q, k);
      return d;
    };
    std::vector<size_t> sc(N), sd(N), rc(N), rd(N), from_displ(N);
    size_t stot = 0, rtot = 0;
    for (size_t p = 0; p < N; ++p) {
      sc[p] = count(me, static_cast<int>(p));
      sd[p] = stot;
      stot += sc[p];
      rc[p] = count(static_cast<int>(p), me);
      rd[p] = rtot;
      rtot += rc[p];
      from_displ[p] = send_displ(static_cast<int>(p), me);
    }
    auto src = source("alltoallv");
    out.push_back({"alltoallv", dt, WEFT_SUM, exact, input_bytes(*src, me, stot), rtot, false,
                   [=](Buffers b, void* s, weft_request_t* r) {
                     return weft_alltoallv(b.send, sc.data(), sd.data(), b.recv, rc.data(), rd.data(), dt, comm, s, r);
                   },
                   [=](size_t k) {
                     size_t p = 0;
                     while (k >= rd[p] + rc[p]) ++p;
                     return bits((*src)(static_cast<int>(p), from_displ[p] + (k - rd[p])));
                   }});
  }
  return out;
}

}  // namespace weft::gputest
