/* See stages.h. A failing block has already printed weft's words; the callback reports the
 * failure to the executor, which names the action. */
#include "stages.h"

#include <stdlib.h>

static weft_status_t failed(const char *what) {
  weft_pipeline_set_error(what);
  return block_status; /* the failed weft call's own status */
}

weft_status_t stage_forward(const weft_stage_call_t *call, void *user) {
  struct stages *s = user;
  struct model *m = s->m;
  const int i = call->microbatch;
  const size_t n = s->mb_size;
  const float *h1 = NULL;
  if (m->has_a) {
    float *out = m->has_b ? s->h1 : call->output->data;
    if (dense_forward(m, &s->dense[i], s->inputs + (size_t)i * n * IN_DIM, n, out)) return failed("block A forward");
    h1 = out;
  }
  if (m->has_b) {
    if (!m->has_a) h1 = call->input->data;
    size_t start, len;
    chunk_of(n, m->lay.tp_rank, m->lay.tp, &start, &len);
    if (moe_forward(m, &s->moe[i], h1, start, len, s->labels + (size_t)i * n, s->scale, &s->loss, &s->correct))
      return failed("block B forward");
  }
  return WEFT_OK;
}

weft_status_t stage_backward_input(const weft_stage_call_t *call, void *user) {
  struct stages *s = user;
  struct model *m = s->m;
  const int i = call->microbatch;
  const float *dh1 = NULL;
  if (m->has_b) {
    float *out = m->has_a ? s->dh1 : call->output->data;
    if (moe_backward_input(m, &s->moe[i], out, s->mb_size)) return failed("block B backward");
    dh1 = out;
  }
  if (m->has_a) {
    if (!m->has_b) dh1 = call->input->data;
    if (dense_backward_input(m, &s->dense[i], dh1)) return failed("block A backward");
  }
  return WEFT_OK;
}

weft_status_t stage_backward_weight(const weft_stage_call_t *call, void *user) {
  struct stages *s = user;
  const int i = call->microbatch;
  if (s->m->has_b) {
    moe_backward_weight(s->m, &s->moe[i]);
    moe_free(&s->moe[i]);
  }
  if (s->m->has_a) {
    dense_backward_weight(s->m, &s->dense[i]);
    dense_free(&s->dense[i]);
  }
  return WEFT_OK;
}

weft_status_t stage_backward(const weft_stage_call_t *call, void *user) {
  weft_status_t st = stage_backward_input(call, user);
  return st != WEFT_OK ? st : stage_backward_weight(call, user);
}
