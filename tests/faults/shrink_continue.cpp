#include "shrink_continue.h"

#include <cstdio>
#include <string>
#include <vector>

#include "random_ops.h"

namespace faults {
namespace {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '"') c = '\'';
  return s;
}

// The members' world ranks, gathered over the new communicator: an allgather that fails means
// a member is gone (it died during the shrink) and the survivors shrink again.
bool gather_members(weft_comm_t comm, int world_rank, std::vector<int32_t>* members) {
  int size = 0;
  weft_comm_size(comm, &size);
  members->assign(static_cast<size_t>(size), -1);
  int32_t mine = world_rank;
  return weft_allgather(&mine, members->data(), 1, WEFT_INT32, comm, nullptr, nullptr) == WEFT_OK;
}

}  // namespace

int shrink_and_continue(weft_comm_t comm, int world_rank, uint64_t seed, size_t max_bytes, long ops) {
  std::vector<weft_comm_t> made;
  weft_comm_t current = comm, shrunk = nullptr;
  std::vector<int32_t> members;
  const double t0 = now_ms();
  int round = 0;
  for (; round < 4 && !shrunk; ++round) {
    weft_comm_t next = nullptr;
    if (weft_status_t s = weft_comm_shrink(current, &next); s != WEFT_OK) {
      // Another try on the same communicator: the survivors that failed here failed alike.
      std::printf("SHRINK-FAILED rank=%d round=%d status=%s msg=\"%s\"\n", world_rank, round, weft_status_string(s),
                  one_line(weft_last_error()).c_str());
      std::fflush(stdout);
      continue;
    }
    made.push_back(next);
    if (gather_members(next, world_rank, &members)) shrunk = next;
    else current = next;
  }
  const double shrink_ms = now_ms() - t0;
  int code = 8;
  long done = 0;
  if (shrunk) {
    int n = 0;
    weft_comm_size(shrunk, &n);
    Rng rng(seed ^ 0x5eedull);
    Outcome out;
    for (; done < ops; ++done) {
      Spec spec = draw_spec(rng, n, max_bytes, false, static_cast<uint64_t>(done) + 1);
      out = run_batch(shrunk, &spec, 1, false, true);
      if (out.status != WEFT_OK || out.wrong_data) break;
    }
    if (out.status == WEFT_OK && !out.wrong_data && weft_barrier(shrunk, nullptr, nullptr) == WEFT_OK) {
      std::string list;
      for (int32_t w : members) list += (list.empty() ? "" : ",") + std::to_string(w);
      std::printf("SHRINK-OK rank=%d size=%d members=%s rounds=%d shrink_ms=%.0f ops=%ld t=%lld\n", world_rank, n,
                  list.c_str(), round, shrink_ms, done, static_cast<long long>(wall_ms()));
      code = 0;
      // WEFT_TEST_INJECT=1: the checks on the new communicator must have caught every corruption.
      long injected = 0, caught = 0;
      if (inject_report(&injected, &caught)) {
        std::printf("INJECT rank=%d corrupted=%ld caught=%ld\n", world_rank, injected, caught);
        if (injected == 0 || caught != injected) code = 7;
      }
    } else {
      std::printf("SHRINK-FAILED rank=%d round=%d status=%s msg=\"%s on the shrunk communicator: %s\"\n", world_rank,
                  round, weft_status_string(out.status), out.wrong_data ? "wrong data" : "operation failed",
                  one_line(out.message).c_str());
      for (weft_request_t r : out.pending) weft_request_free(r);
    }
  } else {
    std::printf("SHRINK-FAILED rank=%d round=%d status=none msg=\"no working communicator after %d shrink rounds\"\n",
                world_rank, round, round);
  }
  std::fflush(stdout);
  for (auto it = made.rbegin(); it != made.rend(); ++it) weft_comm_destroy(*it);
  return code;
}

}  // namespace faults
