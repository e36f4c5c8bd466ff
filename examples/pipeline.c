/* Pipeline parallelism: a ZB-V schedule (two stages per rank in a V, each backward split into
 * an input part I and a weight part W) is generated, validated and simulated (which prints its
 * bubble), then run on a toy model: stage s maps a vector x to a[s] * x + c[s], the loss is
 * 0.5 * |output|^2. The callbacks compute the forward, the input gradient (I) and the weight
 * gradients (W) for real; the gradients of this rank's stages must equal the same computation
 * done in one process. Run with any number of ranks:
 *   build/bin/weftrun -n 4 build/bin/pipeline_example */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <weft/weft.h>

#include "example_check.h"

enum { N = 4, MAX_STAGES = 64, MAX_MB = 64 };

/* The model and what a rank keeps between a micro-batch's forward and its backward pieces. */
struct model {
  int stages, microbatches;
  float a[MAX_STAGES], c[MAX_STAGES];
  float da[MAX_STAGES], dc[MAX_STAGES];     /* gradients, summed over micro-batches */
  float input[MAX_STAGES][MAX_MB][N];      /* F's input (weft's buffer is valid until I only; W needs it) */
  float grad_out[MAX_STAGES][MAX_MB][N];    /* dLoss/d(stage output), from I for W */
};

static float data(int mb, int k) { return sinf((float)(mb * 7 + k)); }

static weft_status_t forward(const weft_stage_call_t *call, void *user) {
  struct model *m = user;
  const int s = call->stage, i = call->microbatch;
  float *x = m->input[s][i];
  for (int k = 0; k < N; ++k) x[k] = call->input ? ((const float *)call->input->data)[k] : data(i, k);
  float *y = call->output ? call->output->data : m->grad_out[s][i]; /* last stage: y = dLoss/dy */
  for (int k = 0; k < N; ++k) y[k] = m->a[s] * x[k] + m->c[s];
  return WEFT_OK;
}

/* I: dLoss/dx = a * dLoss/dy, handed to the previous stage. */
static weft_status_t backward_input(const weft_stage_call_t *call, void *user) {
  struct model *m = user;
  const int s = call->stage, i = call->microbatch;
  if (call->input) {
    const float *g = call->input->data;
    for (int k = 0; k < N; ++k) m->grad_out[s][i][k] = g[k];
  }
  if (call->output) {
    float *gx = call->output->data;
    for (int k = 0; k < N; ++k) gx[k] = m->a[s] * m->grad_out[s][i][k];
  }
  return WEFT_OK;
}

/* W: dLoss/da = sum g * x (x: the forward input, kept), dLoss/dc = sum g. */
static weft_status_t backward_weight(const weft_stage_call_t *call, void *user) {
  struct model *m = user;
  const int s = call->stage, i = call->microbatch;
  for (int k = 0; k < N; ++k) {
    m->da[s] += m->grad_out[s][i][k] * m->input[s][i][k];
    m->dc[s] += m->grad_out[s][i][k];
  }
  return WEFT_OK;
}

int main(void) {
  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, NULL));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));

  /* The schedule: p = size ranks, S = 2p stages in a V, m = 2p micro-batches. */
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = size;
  sc.microbatches = 2 * size;
  weft_schedule_t schedule;
  CHECK(weft_schedule_generate(WEFT_SCHEDULE_ZB_V, &sc, &schedule));
  CHECK(weft_schedule_validate(schedule));
  weft_schedule_info_t info = WEFT_SCHEDULE_INFO_INIT;
  CHECK(weft_schedule_info(schedule, &info));
  if (info.stages > MAX_STAGES || info.microbatches > MAX_MB) {
    fprintf(stderr, "too many ranks for this example (at most %d)\n", MAX_STAGES / 2);
    return 1;
  }

  /* Simulated with F = 1, I = 1, W = 1 time units per stage. */
  double ones[MAX_STAGES];
  for (int s = 0; s < info.stages; ++s) ones[s] = 1.0;
  weft_pipeline_costs_t costs = WEFT_PIPELINE_COSTS_INIT;
  costs.nstages = info.stages;
  costs.forward = ones;
  costs.backward_input = ones;
  costs.backward_weight = ones;
  weft_timeline_t simulated;
  CHECK(weft_schedule_simulate(schedule, &costs, &simulated));
  weft_timeline_info_t sim = WEFT_TIMELINE_INFO_INIT;
  CHECK(weft_timeline_info(simulated, &sim));
  if (rank == 0) {
    printf("pipeline: ZB-V, %d ranks, %d stages, %d micro-batches: simulated makespan %.0f units, bubble %.1f%%\n",
           info.ranks, info.stages, info.microbatches, sim.makespan, 100.0 * sim.bubble_fraction);
  }
  CHECK(weft_timeline_destroy(simulated));

  /* The toy model, the same on every rank (each rank uses its own stages). */
  static struct model m;
  m.stages = info.stages;
  m.microbatches = info.microbatches;
  for (int s = 0; s < m.stages; ++s) {
    m.a[s] = 0.9f + 0.05f * (float)(s % 5);
    m.c[s] = 0.01f * (float)(s - 3);
  }
  int64_t shape[1] = {N};
  weft_tensor_t boundaries[MAX_STAGES];
  for (int s = 0; s + 1 < m.stages; ++s) {
    weft_tensor_t t = {0};
    t.device_type = WEFT_DEVICE_CPU;
    t.ndim = 1;
    t.dtype = WEFT_FLOAT32;
    t.shape = shape;
    boundaries[s] = t;
  }
  weft_pipeline_config_t pc = WEFT_PIPELINE_CONFIG_INIT;
  pc.forward = forward;
  pc.backward_input = backward_input;
  pc.backward_weight = backward_weight;
  pc.user_data = &m;
  pc.boundaries = boundaries;
  pc.nboundaries = (size_t)(m.stages - 1);
  pc.record = 1;
  weft_pipeline_t pipeline;
  CHECK(weft_pipeline_create(comm, schedule, &pc, &pipeline));
  weft_timeline_t measured;
  CHECK(weft_pipeline_run(pipeline, &measured));
  weft_timeline_info_t run = WEFT_TIMELINE_INFO_INIT;
  CHECK(weft_timeline_info(measured, &run));

  /* The same gradients in one process: every micro-batch through all stages and back. */
  float da[MAX_STAGES] = {0}, dc[MAX_STAGES] = {0};
  for (int i = 0; i < m.microbatches; ++i) {
    float x[MAX_STAGES + 1][N];
    for (int k = 0; k < N; ++k) x[0][k] = data(i, k);
    for (int s = 0; s < m.stages; ++s)
      for (int k = 0; k < N; ++k) x[s + 1][k] = m.a[s] * x[s][k] + m.c[s];
    float g[N];
    for (int k = 0; k < N; ++k) g[k] = x[m.stages][k];
    for (int s = m.stages - 1; s >= 0; --s) {
      for (int k = 0; k < N; ++k) {
        da[s] += g[k] * x[s][k];
        dc[s] += g[k];
        g[k] *= m.a[s];
      }
    }
  }
  float worst = 0.0f;
  int mine = 0;
  for (int s = 0; s < m.stages; ++s) {
    int holder;
    CHECK(weft_schedule_stage_rank(schedule, s, &holder));
    if (holder != rank) continue;
    ++mine;
    const float ea = fabsf(m.da[s] - da[s]) / fmaxf(fabsf(da[s]), 1e-3f);
    const float ec = fabsf(m.dc[s] - dc[s]) / fmaxf(fabsf(dc[s]), 1e-3f);
    worst = fmaxf(worst, fmaxf(ea, ec));
  }
  /* Every rank learns whether any rank failed, so they all exit alike. */
  float all_worst;
  CHECK(weft_allreduce(&worst, &all_worst, 1, WEFT_FLOAT32, WEFT_MAX, comm, NULL, NULL));
  if (rank == 0) {
    printf("pipeline: measured makespan %.3f ms, bubble %.1f%%; gradients of every stage match one process "
           "(worst relative difference %.2e)\n",
           1e3 * run.makespan, 100.0 * run.bubble_fraction, all_worst);
  }
  CHECK(weft_timeline_destroy(measured));
  CHECK(weft_pipeline_destroy(pipeline));
  CHECK(weft_schedule_destroy(schedule));
  CHECK(weft_comm_destroy(comm));
  if (mine != 2 || all_worst > 1e-5f) {
    fprintf(stderr, "rank %d: %d stages here (expected 2); gradients differ from one process by %.2e (> 1e-5)\n", rank,
            mine, all_worst);
    return 1;
  }
  return 0;
}
