// A seeded stream of random weft operations, shared by the fault-matrix driver and the soak:
// every collective of weft/comm.h, paired send/recv and p2p batches, blocking or asynchronous
// (up to three queued before the waits), with an independent reference for every result.
// All ranks draw the same stream from the same seed, so they issue matching operations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace faults {

// splitmix64: small, seedable, the same sequence on every rank and every platform.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
};

enum class Kind {
  allreduce, broadcast, reduce, allgather, allgatherv, reduce_scatter, alltoall, alltoallv, gather,
  scatter, barrier, sendrecv, p2p_batch, count_
};
const char* kind_name(Kind k);

struct Spec {
  Kind kind = Kind::barrier;
  size_t count = 0;        // elements (int32) per rank or per block, see random_ops.cpp
  int root = 0;
  weft_op_t op = WEFT_SUM;  // SUM or MAX
  bool in_place = false;
  uint64_t seq = 0;        // salt of the data: the reference recomputes every element from it
};

// Byte sizes: fault runs draw log-uniformly in 0..max_bytes; the soak skews further toward
// small (exponent^1.5) so that 10^5 operations up to 16 MiB fit in minutes on 2 cores.
Spec draw_spec(Rng& rng, int nranks, size_t max_bytes, bool skew_small, uint64_t seq);

// What an operation reported when it did not succeed.
struct Outcome {
  weft_status_t status = WEFT_OK;
  std::string message;  // weft_last_error() at the failure
  const char* op = "";  // the operation that failed
  double op_ms = 0;     // from the issue of the failing batch to the failure
  bool wrong_data = false;
  // Requests still pending when the failure was seen: the caller frees them after it has
  // reported (each free may wait up to the deadline).
  std::vector<weft_request_t> pending;
  // The buffers of the pending requests: weft may write into them until each request is
  // freed, so they outlive the requests (release after freeing them).
  std::shared_ptr<void> buffers;
  // A sub-communicator the failure happened on (split_and_use), for the caller to destroy
  // after it has reported.
  weft_comm_t sub = nullptr;
};

// Issues `nspecs` operations on comm (asynchronously when async, then waits for them in
// order; else one by one, blocking) and, when verify, compares every result with the
// reference. Returns the first failure, if any.
Outcome run_batch(weft_comm_t comm, const Spec* specs, int nspecs, bool async, bool verify);

// Splits comm by rank parity (key = -rank, so the order reverses), runs a verified allreduce
// on the new communicator, and destroys it unless `leak` (the soak's flatness self-test).
Outcome split_and_use(weft_comm_t comm, uint64_t seq, bool leak);

// WEFT_TEST_INJECT=1: run_batch corrupts one element of every checked result before the
// check and counts whether the check caught it. True when injecting; *caught must equal
// *injected.
bool inject_report(long* injected, long* caught);

double now_ms();        // monotonic
int64_t wall_ms();      // CLOCK_REALTIME: comparable with the fault script's clock

}  // namespace faults
