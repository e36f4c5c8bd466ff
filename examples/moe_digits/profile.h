/* moe_digits --profile-layers PATH: times the two blocks' forward and backward per sample and
 * writes weft-plan's model file (docs/planner.md describes the format).
 *
 *   weftrun -n 1 moe_digits --profile-layers model.txt    one rank alone on the machine
 *   weftrun -n 8 moe_digits --profile-layers model.txt    every rank times its own copy at once,
 *                                                         as an 8-rank run shares the cores
 * Each rank runs the whole model (dp = pp = tp = ep = 1) on a communicator of its own, at
 * micro-batches of 4..64 samples, and takes the mean time per call (not the median: when ranks
 * outnumber the cores, the time a rank spends descheduled is part of what a step costs). Rank 0
 * writes the median over ranks of the fitted per-sample times. */
#ifndef MOE_DIGITS_PROFILE_H
#define MOE_DIGITS_PROFILE_H

#include <weft/weft.h>

#include "digits.h"
#include "train.h"

/* Returns 0, or prints what failed and returns 1 (collective over `world`). */
int profile_layers(const struct options *o, weft_comm_t world, const struct digits *d, const char *path);

#endif
