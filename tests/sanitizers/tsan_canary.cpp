// ThreadSanitizer's own injection proof (tests/sanitizers/CMakeLists.txt): an asynchronous
// allreduce, whose result weft writes on the communicator's worker thread, is read by the caller.
//   default:            read after weft_wait: weft_wait orders the worker's writes before the
//                       read, so a TSan build must report nothing (and the sums must be right);
//   WEFT_TSAN_RACE=1:   read before weft_wait, the mistake TSan exists to catch: the TSan build
//                       must report a data race (ctest's tsan.canary_race expects the report).
// Either way the program checks the sums after weft_wait, against n * (n - 1) / 2 + i * n.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mp_common.h"

int main() {
  mpt::World w = mpt::init_world();
  const bool race = std::getenv("WEFT_TSAN_RACE") && std::atoi(std::getenv("WEFT_TSAN_RACE")) == 1;
  const size_t count = 4096;
  std::vector<double> send(count), recv(count, -1.0);
  for (size_t i = 0; i < count; ++i) send[i] = w.rank + static_cast<double>(i);

  weft_request_t req = nullptr;
  MPT_OK(weft_allreduce(send.data(), recv.data(), count, WEFT_FLOAT64, WEFT_SUM, w.comm, nullptr, &req));
  double early = 0;
  if (race) {
    for (double v : recv) early += v;  // unsynchronised: the worker thread may be writing recv now
  }
  MPT_OK(weft_wait(req));
  MPT_OK(weft_request_free(req));

  int bad = 0;
  const double base = w.size * (w.size - 1) / 2.0;
  for (size_t i = 0; i < count; ++i) {
    const double want = base + static_cast<double>(i) * w.size;
    if (recv[i] != want && bad++ < 5) mpt::logf("FAIL: recv[%zu] = %g, expected %g", i, recv[i], want);
  }
  mpt::logf("tsan canary (%s): %zu sums %s", race ? "racy read" : "read after weft_wait", count, bad ? "WRONG" : "right");
  if (race) mpt::logf("the racy read summed to %g (any value: it raced the worker)", early);
  MPT_OK(weft_comm_destroy(w.comm));
  return bad ? 1 : 0;
}
