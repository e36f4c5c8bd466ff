// For GoogleTest programs run on every rank: the world communicator made by gtest_mp_main.cpp.
// Every rank runs the same tests in the same order; do not filter differently per rank.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "mp_common.h"

namespace mpt {
extern World g_world;
}  // namespace mpt

// EXPECT/ASSERT helpers that put the status name and weft_last_error() into the message.
#define EXPECT_WEFT_OK(call)                                                                    \
  do {                                                                                          \
    weft_status_t mpt_s_ = (call);                                                              \
    EXPECT_EQ(mpt_s_, WEFT_OK) << #call << " returned " << ::mpt::status_name(mpt_s_) << ": "   \
                               << ::mpt::last_error();                                          \
  } while (0)
#define ASSERT_WEFT_OK(call)                                                                    \
  do {                                                                                          \
    weft_status_t mpt_s_ = (call);                                                              \
    ASSERT_EQ(mpt_s_, WEFT_OK) << #call << " returned " << ::mpt::status_name(mpt_s_) << ": "   \
                               << ::mpt::last_error();                                          \
  } while (0)
