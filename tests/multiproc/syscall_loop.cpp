// Runs one host-memory operation many times between two marker system calls, so that
// tests/multiproc/syscall-budget (which runs every rank under strace) can count the system calls
// the steady state makes per call. The marker is getppid(), which neither weft nor UCX calls.
// Each rank also prints the heap allocations it made per call (alloc_count.h), where countable.
//
//   weftrun -n 2 weft_mp_syscall_loop --op allreduce --bytes 4096 --iters 300
//
// Operations: allreduce broadcast reduce allgather allgatherv reduce_scatter alltoall alltoallv
// gather scatter barrier sendrecv (a two-way ring in one weft_p2p_batch) allreduce_async (with a
// request and weft_wait) allreduce_test (with a request polled by weft_test). --inject adds one
// getpid() per call, which the budget check must report (its self-check).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "alloc_count.h"
#include "mp_common.h"

namespace {

struct Args {
  std::string op = "allreduce";
  size_t bytes = 4096;
  int iters = 300;
  // Past the point where a rank that nothing holds back (a gather's non-root) has run as far
  // ahead as the same-host rings let it (32 messages copied aside plus 8 in the ring): until
  // then the receiver's stash grows, which is start-up, not the steady state counted here.
  int warmup = 60;
  bool inject = false;  // one extra getpid() per call: the budget check must catch it
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) mpt::die("%s needs a value", k.c_str());
      return argv[++i];
    };
    if (k == "--op") a.op = value();
    else if (k == "--bytes") a.bytes = std::stoul(value());
    else if (k == "--iters") a.iters = std::stoi(value());
    else if (k == "--warmup") a.warmup = std::stoi(value());
    else if (k == "--inject") a.inject = true;
    else mpt::die("unknown argument %s (--op NAME --bytes N --iters N --warmup N)", k.c_str());
  }
  return a;
}

// One call of the operation; `count` float32 elements per rank and block.
struct Runner {
  const Args& args;
  mpt::World& w;
  size_t count;
  std::vector<float> send, recv;
  std::vector<size_t> counts, displs;

  Runner(const Args& a, mpt::World& world) : args(a), w(world), count(a.bytes / sizeof(float)) {
    const size_t n = static_cast<size_t>(w.size);
    send.assign(count * n, 1.0f);
    recv.assign(count * n, 0.0f);
    counts.assign(n, count);
    displs.resize(n);
    for (size_t i = 0; i < n; ++i) displs[i] = i * count;
  }

  void once() {
    const std::string& op = args.op;
    float* s = send.data();
    float* r = recv.data();
    const weft_dtype_t f = WEFT_FLOAT32;
    if (op == "allreduce") {
      MPT_OK(weft_allreduce(s, r, count, f, WEFT_SUM, w.comm, nullptr, nullptr));
    } else if (op == "allreduce_async" || op == "allreduce_test") {
      weft_request_t req = nullptr;
      MPT_OK(weft_allreduce(s, r, count, f, WEFT_SUM, w.comm, nullptr, &req));
      if (op == "allreduce_test") {
        int done = 0;
        while (!done) {
          weft_status_t st = weft_test(req, &done);
          if (st != WEFT_OK && st != WEFT_IN_PROGRESS) mpt::die("weft_test: %s", mpt::last_error().c_str());
        }
      } else {
        MPT_OK(weft_wait(req));
      }
      MPT_OK(weft_request_free(req));
    } else if (op == "broadcast") {
      MPT_OK(weft_broadcast(r, count, f, 0, w.comm, nullptr, nullptr));
    } else if (op == "reduce") {
      MPT_OK(weft_reduce(s, r, count, f, WEFT_SUM, 0, w.comm, nullptr, nullptr));
    } else if (op == "allgather") {
      MPT_OK(weft_allgather(s, r, count, f, w.comm, nullptr, nullptr));
    } else if (op == "allgatherv") {
      MPT_OK(weft_allgatherv(s, count, r, counts.data(), displs.data(), f, w.comm, nullptr, nullptr));
    } else if (op == "reduce_scatter") {
      MPT_OK(weft_reduce_scatter(s, r, count, f, WEFT_SUM, w.comm, nullptr, nullptr));
    } else if (op == "alltoall") {
      MPT_OK(weft_alltoall(s, r, count, f, w.comm, nullptr, nullptr));
    } else if (op == "alltoallv") {
      MPT_OK(weft_alltoallv(s, counts.data(), displs.data(), r, counts.data(), displs.data(), f, w.comm, nullptr,
                            nullptr));
    } else if (op == "gather") {
      MPT_OK(weft_gather(s, r, count, f, 0, w.comm, nullptr, nullptr));
    } else if (op == "scatter") {
      MPT_OK(weft_scatter(s, r, count, f, 0, w.comm, nullptr, nullptr));
    } else if (op == "barrier") {
      MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
    } else if (op == "sendrecv") {
      const int right = (w.rank + 1) % w.size;
      const int left = (w.rank + w.size - 1) % w.size;
      weft_p2p_op_t ops[2] = {{WEFT_P2P_SEND, s, count, f, right}, {WEFT_P2P_RECV, r, count, f, left}};
      MPT_OK(weft_p2p_batch(ops, 2, w.comm, nullptr, nullptr));
    } else {
      mpt::die("unknown --op %s", op.c_str());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  mpt::World w = mpt::init_world();
  Runner run(args, w);
  for (int i = 0; i < args.warmup; ++i) run.once();
  MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
  getppid();  // marker: the counted part starts
  const uint64_t allocs0 = mpt::alloc_count();
  for (int i = 0; i < args.iters; ++i) {
    run.once();
    if (args.inject) getpid();
  }
  const uint64_t allocs = mpt::alloc_count() - allocs0;
  getppid();  // marker: the counted part ends
  MPT_OK(weft_barrier(w.comm, nullptr, nullptr));
  MPT_OK(weft_comm_destroy(w.comm));
  // One line per rank for syscall-budget's allocation check.
  if (mpt::alloc_count_available()) {
    std::printf("syscall_loop: rank %d allocations per call: %.4f\n", w.rank,
                static_cast<double>(allocs) / args.iters);
  }
  if (w.rank == 0) std::printf("syscall_loop: %s %zu bytes x %d on %d ranks done\n", args.op.c_str(), args.bytes,
                               args.iters, w.size);
  return 0;
}
