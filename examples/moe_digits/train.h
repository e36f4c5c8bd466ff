/* One training run of the demo on this process's share of a layout: the mesh, ZeRO, the tuned
 * pipeline, the step loop with its progress lines, and what the outputs need. */
#ifndef MOE_DIGITS_TRAIN_H
#define MOE_DIGITS_TRAIN_H

#include <weft/weft.h>

#include "digits.h"

struct options {
  int ranks;                     /* expected world size (0 = whatever weftrun started) */
  int dp, pp, tp, ep, zero;
  weft_schedule_kind_t schedule;
  const char *schedule_name;
  int microbatches;              /* 0 = the auto-tuner's choice */
  int steps, global_batch, eval_every, trace_step;
  double lr;
  const char *out;               /* output folder (created by scripts/demo or the caller) */
  const char *reference;         /* loss.csv of a --ranks 1 run to compare against, or NULL */
  const char *layout_json;       /* where to write the layout and its measured step time, or NULL */
  const char *data;              /* the digits CSV */
  double tolerance;              /* the largest relative loss difference allowed vs the reference */
  double min_accuracy;           /* fail below this held-out accuracy (0 = no check) */
  int inject;                    /* WEFT_TEST_INJECT=1: perturb one gradient (the check must fail) */
  const char *profile_layers;    /* --profile-layers PATH: time the blocks, write weft-plan's model file */
};

/* What rank 0 keeps of every step for the outputs. */
struct history {
  int steps;
  double *loss, *test_acc, *step_s, *bubble_measured;
  double *pipeline_s; /* the pipeline's part of each step (the slowest rank's), before the optimizer */
  double *cpu_s;      /* CPU seconds of each step, all ranks' summed (compare with step x cores) */
  double bubble_simulated;
  int microbatches, tuner_candidates, ntest;
  double train_acc_last;
  const double *reference; /* the --ranks 1 loss curve, printed beside ours (NULL: none) */
  const double *reference_step_s; /* and its step times */
  int reference_steps;
};

/* |a - b| / |b|: the equivalence check's measure. */
double relative_difference(double a, double b);

/* Returns 0 when the run completed (the reference check is the caller's), 1 on any failure. */
int train(const struct options *o, weft_comm_t world, const struct digits *d, struct history *h);

#endif
