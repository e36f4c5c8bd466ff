/* The examples' one error check: a weft call that fails prints the call, its status and
 * weft_last_error() (which names the rank, the operation and what was expected), and the
 * program exits with 1. A real program would clean up or fall back instead. */
#ifndef WEFT_EXAMPLE_CHECK_H
#define WEFT_EXAMPLE_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <weft/weft.h>

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    weft_status_t st_ = (call);                                                                      \
    if (st_ != WEFT_OK) {                                                                            \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, weft_status_string(st_), weft_last_error()); \
      exit(1);                                                                                       \
    }                                                                                                \
  } while (0)

#endif
