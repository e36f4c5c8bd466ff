/* Peer death across hosts: rank `victim` SIGKILLs itself in the middle of a stream of
 * allreduces; every other rank must get WEFT_ERR_REMOTE naming the victim (or
 * WEFT_ERR_TIMEOUT naming it, should the transport not notice first) within the deadline.
 * Exit 0 = the survivor behaved; the victim never exits normally.
 *   mh_failure VICTIM */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  const int victim = atoi(argv[1]);
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = 10000;
  weft_comm_t comm;
  if (weft_comm_init_from_env(&comm, &cfg) != WEFT_OK) {
    fprintf(stderr, "init failed: %s\n", weft_last_error());
    return 3;
  }
  int rank;
  weft_comm_rank(comm, &rank);
  float x[256] = {0};
  double died_at = 0;
  weft_status_t st = WEFT_OK;
  for (int i = 0; i < 100000 && st == WEFT_OK; ++i) {
    if (i == 20) {
      if (rank == victim) raise(SIGKILL);
      died_at = now_s();
    }
    st = weft_allreduce(x, x, 256, WEFT_FLOAT32, WEFT_SUM, comm, NULL, NULL);
  }
  double waited = now_s() - died_at;
  char expect[32];
  snprintf(expect, sizeof expect, "rank %d", victim);
  const char *msg = weft_last_error();
  int ok = (st == WEFT_ERR_REMOTE || st == WEFT_ERR_TIMEOUT) && strstr(msg, expect) && waited < 15.0;
  printf("rank %d: %s after %.3f s: %s -> %s\n", rank, weft_status_string(st), waited, msg, ok ? "as expected" : "WRONG");
  weft_comm_destroy(comm);
  return ok ? 0 : 1;
}
