// One rank of the kill -9 test (started by weft_mp_failure_kill, not by weftrun):
//   weft_mp_failure_kill_child <unique id as 256 hex digits> <rank> <nranks> <timeout_ms>
// Joins with weft_comm_init, then runs allreduces until one fails, printing progress. Exit
// codes: 3 = WEFT_ERR_REMOTE, 4 = WEFT_ERR_TIMEOUT, 5 = another error status, 6 = wrong data,
// 1 = could not start, 0 = never saw an error (the loop ran out).
// After an error a survivor stays alive for timeout_ms + 2 s before it destroys its
// communicator and exits, so that no survivor sees another survivor leave and blames it: every
// survivor must learn about the killed rank itself (or time out).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp_common.h"

int main(int argc, char** argv) {
  using namespace mpt;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <id-hex> <rank> <nranks> <timeout_ms>\n", argv[0]);
    return 1;
  }
  const std::string hex = argv[1];
  const int rank = std::atoi(argv[2]), n = std::atoi(argv[3]);
  set_log_rank(rank, n);
  weft_unique_id_t id = unique_id_from_hex(hex);
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = std::atoll(argv[4]);
  cfg.name = "kill-test";
  weft_comm_t comm = nullptr;
  weft_status_t s = weft_comm_init(&comm, &id, rank, n, &cfg);
  if (s != WEFT_OK) die("weft_comm_init: %s: %s", status_name(s), last_error().c_str());
  logf("joined");
  std::vector<float> buf(1 << 16);
  const double t_end = now_s() + 120;
  for (long iter = 0; now_s() < t_end; ++iter) {
    for (float& f : buf) f = static_cast<float>(rank + 1);
    s = weft_allreduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, comm, nullptr, nullptr);
    if (s != WEFT_OK) {
      const std::string err = last_error();
      logf("ERROR iter %ld status=%s message: %s", iter, status_name(s), err.c_str());
      const int code = s == WEFT_ERR_REMOTE ? 3 : s == WEFT_ERR_TIMEOUT ? 4 : 5;
      sleep_ms(static_cast<int>(cfg.timeout_ms) + 2000);
      logf("destroying the communicator");
      weft_status_t sd = weft_comm_destroy(comm);
      logf("destroyed (%s); exit %d", status_name(sd), code);
      return code;
    }
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < buf.size(); ++i)
      if (buf[i] != want) {
        logf("WRONG DATA iter %ld index %zu expected %g got %g", iter, i, static_cast<double>(want), static_cast<double>(buf[i]));
        return 6;
      }
    if (iter % 10 == 0) logf("iter %ld ok", iter);
  }
  logf("no error within 120 s");
  weft_comm_destroy(comm);
  return 0;
}
