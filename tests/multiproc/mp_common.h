// Small helpers shared by the multi-rank test programs: world communicator set-up, logging
// with the rank in front, status names, and checks on weft_last_error() texts.
#pragma once

#include <cstdint>
#include <string>

#include "weft/weft.h"

namespace mpt {

struct World {
  weft_comm_t comm = nullptr;
  int rank = 0;
  int size = 1;
};

// Deadline for test communicators: WEFT_TEST_TIMEOUT_MS, default 120 s (a hang becomes a
// WEFT_ERR_TIMEOUT failure long before ctest's own timeout).
int64_t default_timeout_ms();

// weft_comm_init_from_env with timeout_ms (and check_collectives); dies on failure.
World init_world(int64_t timeout_ms = default_timeout_ms(), int check_collectives = 0);

// Every line this process prints starts with "[rank R/N]" once set.
void set_log_rank(int rank, int size);
void logf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

double now_s();  // monotonic seconds
void sleep_ms(int ms);

const char* status_name(weft_status_t s);  // "WEFT_ERR_TIMEOUT", or "status(42)"
std::string last_error();                  // a copy of weft_last_error()

bool contains_ci(const std::string& hay, const std::string& needle);
// True when msg names rank r: "rank 1", "rank=1", "peer 1", "ranks 0, 1", "rank(s) [1]"...
// (a number within a few characters after "rank" or "peer").
bool mentions_rank(const std::string& msg, int r);

std::string env_or(const char* name, const char* dflt);

// For a driver that launches a job's ranks itself (the kill and shrink drivers): makes a unique
// id whose store runs in the driver on a port of its own (WEFT_MASTER_PORT is cleared), clears
// the launcher's rank variables so the children do not take them for their own, and returns
// the id as hex for the children's command lines. Returns "" when no id could be made
// (last_error() says why).
std::string unique_id_for_children();
// The child's side: the id back from that hex; dies naming what is wrong with it.
weft_unique_id_t unique_id_from_hex(const std::string& hex);

}  // namespace mpt

// Dies (exit 1, so weftrun stops the job) when a weft call does not return WEFT_OK.
#define MPT_OK(call)                                                                          \
  do {                                                                                        \
    weft_status_t mpt_s_ = (call);                                                            \
    if (mpt_s_ != WEFT_OK)                                                                    \
      ::mpt::die("%s:%d: %s returned %s: %s", __FILE__, __LINE__, #call,                      \
                 ::mpt::status_name(mpt_s_), ::mpt::last_error().c_str());                    \
  } while (0)
