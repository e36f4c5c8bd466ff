/* Data-parallel training with ZeRO stage 3: a linear model y = w.x + b fitted by SGD with
 * momentum, its parameters partitioned over the ranks. Each step gathers the parameter groups
 * (the second one prefetched while the first is used), computes this rank's gradient on its
 * rows of the batch, hands it to weft (which reduce-scatters it) and lets weft's fused
 * optimizer update this rank's shard. The same training in one process, written out below,
 * must give the same parameters. Run with any number of ranks that divides 8:
 *   build/bin/weftrun -n 4 build/bin/zero_example */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <weft/weft.h>

#include "example_check.h"

enum { IN = 5, BATCH = 8, STEPS = 30 };
static const float kLr = 0.05f, kMomentum = 0.9f;

/* The data: row r of step s, and its target from a fixed "true" model. */
static float input(int s, int r, int i) { return sinf((float)(s * 31 + r * 7 + i)); }
static float target(int s, int r) {
  float y = 0.5f;
  for (int i = 0; i < IN; ++i) y += (float)(i + 1) * 0.1f * input(s, r, i);
  return y;
}

/* dLoss/dw and dLoss/db over rows [r0, r0 + rows), loss = 0.5 * sum (w.x + b - y)^2 / rows. */
static void gradient(int s, int r0, int rows, const float *w, const float *b, float *gw, float *gb) {
  for (int i = 0; i < IN; ++i) gw[i] = 0.0f;
  *gb = 0.0f;
  for (int r = r0; r < r0 + rows; ++r) {
    float e = *b - target(s, r);
    for (int i = 0; i < IN; ++i) e += w[i] * input(s, r, i);
    for (int i = 0; i < IN; ++i) gw[i] += e * input(s, r, i) / (float)rows;
    *gb += e / (float)rows;
  }
}

int main(void) {
  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, NULL));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));
  if (BATCH % size) {
    if (rank == 0) fprintf(stderr, "run with 1, 2, 4 or 8 ranks (the batch of %d splits evenly)\n", BATCH);
    return 1;
  }
  const char *dp = "dp";
  weft_mesh_t mesh;
  CHECK(weft_mesh_create(comm, 1, &size, &dp, NULL, &mesh));

  float w0[IN] = {0}, b0[1] = {0};
  const int64_t w_shape[1] = {IN}, b_shape[1] = {1};
  const weft_tensor_t init[2] = {{w0, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, w_shape, NULL, 0},
                                 {b0, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, b_shape, NULL, 0}};
  const int groups[2] = {0, 1}; /* two groups, so the second can be prefetched */
  const char *names[2] = {"w", "b"};
  weft_zero_config_t config = WEFT_ZERO_CONFIG_INIT;
  config.stage = 3;
  config.optimizer.kind = WEFT_OPTIMIZER_SGD;
  config.optimizer.lr = kLr;
  config.optimizer.momentum = kMomentum;
  config.optimizer.weight_decay = 0.0f;
  config.groups = groups;
  config.names = names;
  weft_zero_t zero;
  CHECK(weft_zero_create(mesh, "dp", init, 2, &config, &zero));

  const int rows = BATCH / size;
  for (int s = 0; s < STEPS; ++s) {
    weft_request_t prefetch;
    CHECK(weft_zero_gather(zero, 0, NULL));      /* w: needed now */
    CHECK(weft_zero_gather(zero, 1, &prefetch)); /* b: travels meanwhile */
    weft_tensor_t w, b;
    CHECK(weft_zero_param(zero, 0, &w));
    CHECK(weft_wait(prefetch));
    CHECK(weft_request_free(prefetch));
    CHECK(weft_zero_param(zero, 1, &b));
    float gw[IN], gb[1];
    gradient(s, rank * rows, rows, (const float *)w.data, (const float *)b.data, gw, gb);
    CHECK(weft_zero_release(zero, 0));
    CHECK(weft_zero_release(zero, 1));
    const weft_tensor_t grads[2] = {{gw, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, w_shape, NULL, 0},
                                    {gb, WEFT_DEVICE_CPU, 0, 1, WEFT_FLOAT32, b_shape, NULL, 0}};
    CHECK(weft_zero_grad_ready(zero, 1, &grads[1])); /* backward's order: the last group first */
    CHECK(weft_zero_grad_ready(zero, 0, &grads[0]));
    CHECK(weft_zero_step(zero, NULL));
  }

  /* The same training in one process: SGD with momentum (torch.optim.SGD's rule). */
  float w[IN] = {0}, b = 0.0f, mw[IN], mb = 0.0f;
  for (int s = 0; s < STEPS; ++s) {
    float gw[IN], gb;
    gradient(s, 0, BATCH, w, &b, gw, &gb);
    for (int i = 0; i < IN; ++i) {
      mw[i] = s == 0 ? gw[i] : kMomentum * mw[i] + gw[i];
      w[i] -= kLr * mw[i];
    }
    mb = s == 0 ? gb : kMomentum * mb + gb;
    b -= kLr * mb;
  }
  weft_tensor_t pw, pb;
  CHECK(weft_zero_gather(zero, 0, NULL));
  CHECK(weft_zero_gather(zero, 1, NULL));
  CHECK(weft_zero_param(zero, 0, &pw));
  CHECK(weft_zero_param(zero, 1, &pb));
  float worst = fabsf(((const float *)pb.data)[0] - b) / fmaxf(fabsf(b), 1e-3f);
  for (int i = 0; i < IN; ++i) {
    const float e = fabsf(((const float *)pw.data)[i] - w[i]) / fmaxf(fabsf(w[i]), 1e-3f);
    worst = e > worst ? e : worst;
  }
  weft_zero_memory_t mem = WEFT_ZERO_MEMORY_INIT;
  CHECK(weft_zero_memory(zero, &mem));
  if (rank == 0) {
    printf("zero: %d ranks, stage 3, b = %.5f (one process: %.5f), worst relative difference %.2e\n", size,
           ((const float *)pb.data)[0], b, worst);
    printf("zero: this rank holds %llu bytes of parameters, %llu of gradients, %llu of optimizer state\n",
           (unsigned long long)mem.params, (unsigned long long)mem.grads, (unsigned long long)mem.optimizer);
  }
  CHECK(weft_zero_destroy(zero));
  CHECK(weft_mesh_destroy(mesh));
  CHECK(weft_comm_destroy(comm));
  if (worst > 1e-5f) {
    fprintf(stderr, "rank %d: ZeRO training differs from one process by %.2e (> 1e-5)\n", rank, worst);
    return 1;
  }
  return 0;
}
