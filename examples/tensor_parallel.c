/* A Megatron-style tensor-parallel MLP, forward and backward, in plain C: a column-parallel
 * linear layer (W1's columns split over "tp"), ReLU, a row-parallel linear layer (W2's rows
 * split over "tp"), and a squared-error loss. weft does the communication:
 *   COPY   before the column-parallel layer: forward identity, backward all-reduce of dX;
 *   REDUCE after the row-parallel layer: forward all-reduce of the partial outputs, backward
 *          identity.
 * The backward COPY all-reduce runs with a request while this rank computes its weight
 * gradient (the overlap Megatron does). The same model is then computed whole in this process,
 * and the outputs and every gradient this rank holds must match it. Run it with 2 ranks (TP = 2;
 * 4, 6, ... give data-parallel replicas, each with its own batch):
 *   build/bin/weftrun -n 2 build/bin/tensor_parallel_example */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#include "example_check.h"

enum { B = 4, D = 6, H = 9 }; /* batch, model width, hidden width (9 over 2 ranks: 5 + 4) */

static float w1_at(int i, int j) { return (float)((i * 7 + j * 3) % 11 - 5) * 0.1f; } /* W1 [D][H] */
static float w2_at(int j, int i) { return (float)((j * 5 + i * 2) % 13 - 6) * 0.05f; } /* W2 [H][D] */
static float x_at(int b, int i, int dp) { return (float)((b * 5 + i * 2 + dp) % 9 - 4) * 0.25f; }
static float t_at(int b, int i) { return (float)((b + i) % 3 - 1) * 0.5f; }

/* c[m][n] = sum_k a[m][k] * b[k][n]; a and b are read through (row, column) strides, so a
 * transposed operand is the same memory with its strides swapped. c is contiguous. */
static void matmul(int m, int n, int k, const float *a, int a_rs, int a_cs, const float *b, int b_rs, int b_cs,
                   float *c) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float s = 0;
      for (int p = 0; p < k; ++p) s += a[i * a_rs + p * a_cs] * b[p * b_rs + j * b_cs];
      c[i * n + j] = s;
    }
}

static weft_tensor_t view2(float *data, const int64_t *shape) {
  weft_tensor_t t = {data, WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, shape, NULL, 0};
  return t;
}

/* Largest |a - b| relative to max(1, |b|) over n values. */
static double max_err(const float *a, const float *b, int n) {
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const double e = fabs((double)a[i] - (double)b[i]) / fmax(1.0, fabs((double)b[i]));
    worst = e > worst ? e : worst;
  }
  return worst;
}

int main(void) {
  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, NULL));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));
  if (size % 2) {
    if (rank == 0) fprintf(stderr, "run with an even number of ranks (dp x tp = %d/2 x 2)\n", size);
    return 1;
  }
  const int shape[2] = {size / 2, 2};
  const char *names[2] = {"dp", "tp"};
  weft_mesh_t mesh;
  CHECK(weft_mesh_create(comm, 2, shape, names, NULL, &mesh));
  int coords[2];
  CHECK(weft_mesh_coords(mesh, coords, NULL));
  const int dp = coords[0];

  /* This rank's hidden units [h0, h0 + hl): W1's columns and W2's rows, by the split rule. */
  const weft_placement_t cols[2] = {WEFT_PLACEMENT_REPLICATE_INIT, {WEFT_SHARD, 1, WEFT_SUM}};
  const int64_t w1_global[2] = {D, H};
  int64_t w1_local[2], w1_offset[2];
  CHECK(weft_mesh_local_shape(mesh, cols, 2, w1_global, -1, w1_local, w1_offset));
  const int h0 = (int)w1_offset[1], hl = (int)w1_local[1];

  float x[B * D], x_tp[B * D], w1[D * H], w2[H * D], y1[B * H], a1[B * H], z_part[B * D], z[B * D];
  float dz[B * D], dz_part[B * D], dw2[H * D], da1[B * H], dy1[B * H], dw1[D * H], dx_part[B * D], dx[B * D];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < D; ++i) x[b * D + i] = x_at(b, i, dp);
  for (int i = 0; i < D; ++i)
    for (int j = 0; j < hl; ++j) w1[i * hl + j] = w1_at(i, h0 + j);
  for (int j = 0; j < hl; ++j)
    for (int i = 0; i < D; ++i) w2[j * D + i] = w2_at(h0 + j, i);

  const int64_t bd[2] = {B, D};
  weft_tensor_t tx = view2(x, bd), tx_tp = view2(x_tp, bd), tz_part = view2(z_part, bd), tz = view2(z, bd);
  weft_tensor_t tdz = view2(dz, bd), tdz_part = view2(dz_part, bd), tdx_part = view2(dx_part, bd), tdx = view2(dx, bd);

  /* Forward. COPY: identity into the tensor-parallel region. */
  CHECK(weft_region_apply(mesh, "tp", WEFT_REGION_COPY, 0, 0, &tx, &tx_tp, NULL, NULL));
  matmul(B, hl, D, x_tp, D, 1, w1, hl, 1, y1); /* column-parallel: Y1 = X W1[:, h0:h0+hl] */
  for (int i = 0; i < B * hl; ++i) a1[i] = y1[i] > 0 ? y1[i] : 0;
  matmul(B, D, hl, a1, hl, 1, w2, D, 1, z_part); /* row-parallel: a partial sum of Z */
  CHECK(weft_region_apply(mesh, "tp", WEFT_REGION_REDUCE, 0, 0, &tz_part, &tz, NULL, NULL));
  float loss = 0;
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < D; ++i) {
      dz[b * D + i] = z[b * D + i] - t_at(b, i);
      loss += 0.5f * dz[b * D + i] * dz[b * D + i];
    }

  /* Backward. REDUCE's backward: identity. */
  CHECK(weft_region_apply(mesh, "tp", WEFT_REGION_REDUCE, 1, 0, &tdz, &tdz_part, NULL, NULL));
  matmul(hl, D, B, a1, 1, hl, dz_part, D, 1, dw2);  /* dW2 = A1^T dZ */
  matmul(B, hl, D, dz_part, D, 1, w2, 1, D, da1);   /* dA1 = dZ W2^T */
  for (int i = 0; i < B * hl; ++i) dy1[i] = y1[i] > 0 ? da1[i] : 0;
  matmul(B, D, hl, dy1, hl, 1, w1, 1, hl, dx_part); /* this rank's term of dX = dY1 W1^T */
  /* COPY's backward: all-reduce dX, overlapped with dW1 = X^T dY1. */
  weft_request_t req;
  CHECK(weft_region_apply(mesh, "tp", WEFT_REGION_COPY, 1, 0, &tdx_part, &tdx, NULL, &req));
  matmul(D, hl, B, x_tp, 1, D, dy1, hl, 1, dw1);
  CHECK(weft_wait(req));
  CHECK(weft_request_free(req));

  /* The same model, whole, in this process. */
  float rw1[D * H], rw2[H * D], ry1[B * H], ra1[B * H], rz[B * D], rdz[B * D], rdw2[H * D], rda1[B * H];
  float rdy1[B * H], rdw1[D * H], rdx[B * D];
  for (int i = 0; i < D; ++i)
    for (int j = 0; j < H; ++j) rw1[i * H + j] = w1_at(i, j);
  for (int j = 0; j < H; ++j)
    for (int i = 0; i < D; ++i) rw2[j * D + i] = w2_at(j, i);
  matmul(B, H, D, x, D, 1, rw1, H, 1, ry1);
  for (int i = 0; i < B * H; ++i) ra1[i] = ry1[i] > 0 ? ry1[i] : 0;
  matmul(B, D, H, ra1, H, 1, rw2, D, 1, rz);
  float rloss = 0;
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < D; ++i) {
      rdz[b * D + i] = rz[b * D + i] - t_at(b, i);
      rloss += 0.5f * rdz[b * D + i] * rdz[b * D + i];
    }
  matmul(H, D, B, ra1, 1, H, rdz, D, 1, rdw2);
  matmul(B, H, D, rdz, D, 1, rw2, 1, D, rda1);
  for (int i = 0; i < B * H; ++i) rdy1[i] = ry1[i] > 0 ? rda1[i] : 0;
  matmul(B, D, H, rdy1, H, 1, rw1, 1, H, rdx);
  matmul(D, H, B, x, 1, D, rdy1, H, 1, rdw1);

  /* This rank's slices of the whole model's weight gradients. */
  float want_dw1[D * H], want_dw2[H * D];
  for (int i = 0; i < D; ++i)
    for (int j = 0; j < hl; ++j) want_dw1[i * hl + j] = rdw1[i * H + h0 + j];
  memcpy(want_dw2, rdw2 + h0 * D, sizeof(float) * (size_t)(hl * D));
  const double errs[5] = {max_err(z, rz, B * D), max_err(&loss, &rloss, 1), max_err(dx, rdx, B * D),
                          max_err(dw1, want_dw1, D * hl), max_err(dw2, want_dw2, hl * D)};
  static const char *what[5] = {"output", "loss", "dX", "dW1 (this rank's columns)", "dW2 (this rank's rows)"};
  int bad = 0;
  for (int i = 0; i < 5; ++i) {
    /* Float32 sums of at most 9 products of values below 2: the split only reorders them. */
    if (errs[i] > 1e-5) {
      fprintf(stderr, "rank %d: %s differs from the single-process model by %g\n", rank, what[i], errs[i]);
      bad = 1;
    }
  }
  int32_t all_bad = 0, mine = bad;
  CHECK(weft_allreduce(&mine, &all_bad, 1, WEFT_INT32, WEFT_MAX, comm, NULL, NULL));
  if (rank == 0 && !all_bad) printf("tensor_parallel: ok (TP=2 x DP=%d, loss %.6f, hidden units %d + %d)\n", size / 2,
                                     (double)loss, (H + 1) / 2, H - (H + 1) / 2);
  CHECK(weft_mesh_destroy(mesh));
  CHECK(weft_comm_destroy(comm));
  return all_bad ? 1 : 0;
}
