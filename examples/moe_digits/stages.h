/* The pipeline's stage callbacks: stage s of pp holds block A (s = 0), block B (s = pp - 1), or
 * both when pp = 1. They run the blocks on the current step's micro-batches and keep each
 * micro-batch's caches from F until its W (or B) is done. */
#ifndef MOE_DIGITS_STAGES_H
#define MOE_DIGITS_STAGES_H

#include "blocks.h"

enum { MAX_MICROBATCHES = 256 };

struct stages {
  struct model *m;
  int microbatches;
  size_t mb_size;         /* tokens per micro-batch (this data-parallel replica's) */
  const float *inputs;    /* [microbatches * mb_size, 64] this replica's batch */
  const int *labels;      /* [microbatches * mb_size] */
  double scale;           /* 1 / global batch */
  double loss, correct;   /* summed over this rank's chunks this step */
  struct dense_cache dense[MAX_MICROBATCHES];
  struct moe_cache moe[MAX_MICROBATCHES];
  float *h1;              /* pp = 1: block A's output handed to block B in memory */
  float *dh1;             /* pp = 1: the gradient handed back */
};

weft_status_t stage_forward(const weft_stage_call_t *call, void *user);
weft_status_t stage_backward_input(const weft_stage_call_t *call, void *user);
weft_status_t stage_backward_weight(const weft_stage_call_t *call, void *user);
weft_status_t stage_backward(const weft_stage_call_t *call, void *user); /* I then W */

#endif
