// The generators' compute-only action lists, one function per method (generate.cpp checks each
// method's rule first, then adds placement, REDUCE_GRAD and SEND/RECV). Every function here may
// assume its method's rule holds: p >= 1, m >= 1 and what weft/pipeline.h states per method.
#pragma once

#include <vector>

#include "core/pipeline/schedule.h"

namespace weft::pipeline::gen {

// Sizes far beyond any pipeline, so that a mistyped argument (or a plugin's) is an error, not an
// allocation of gigabytes: compute actions are 3 v m per rank at most. generate.cpp and
// gen_plugin.cpp both check them.
constexpr int kMaxRanks = 1 << 12;
constexpr int kMaxMicrobatches = 1 << 16;
constexpr int kMaxStagesPerRank = 64;
constexpr long long kMaxActions = 1LL << 26;

using Lists = std::vector<std::vector<Action>>;

// gen_simple.cpp
Lists gpipe(int p, int m);
Lists one_f_one_b(int p, int m);
Lists interleaved_1f1b(int p, int m, int v);

// gen_zero_bubble.cpp
Lists zb_h1(int p, int m);
Lists zb_h2(int p, int m);
Lists zb_v(int p, int m);

// gen_dualpipe.cpp
Lists dualpipe_v(int p, int m);

// gen_comm.cpp: SEND/RECV actions for orders with several stages per rank, ordered by the time
// each message is sent in a unit-cost run (the file says why lowering.cpp's placement is not
// enough there). Replaces any SEND/RECV actions s has.
void place_communication_by_time(Schedule& s);

// generate.cpp: REDUCE_GRAD(s) right after the last backward piece (B or W) of stage s on its rank.
void add_reduce_grad(Lists& lists);

// The V placement of ZB-V and DualPipeV: rank r holds stages r and 2p-1-r.
inline int v_shape_rank(int stage, int p) { return stage < p ? stage : 2 * p - 1 - stage; }

}  // namespace weft::pipeline::gen
