/* A 2-d mesh ("dp" x "tp") and a sharded tensor moved between layouts, as a tensor-parallel
 * layer's weight would be: stored sharded by rows over every rank, then gathered along "dp" so
 * each tp group holds the column shard it multiplies with. Checks every element against the
 * global tensor, which is a function of its index. Run it with 4 ranks (or 2, 6, 8):
 *   build/bin/weftrun -n 4 build/bin/redistribute_example */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <weft/weft.h>

#include "example_check.h"

enum { ROWS = 9, COLS = 6 }; /* deliberately not divisible by the mesh: uneven shards */

static float value_at(int64_t i, int64_t j) { return (float)(i * 100 + j); }

/* A sharded tensor on `mesh` in `layout`, with a freshly allocated local piece; fills it from
 * the global tensor when `fill` is set. */
static weft_sharded_t make(weft_mesh_t mesh, const weft_placement_t *layout, int fill, float **data,
                           int64_t local[2]) {
  const int64_t global[2] = {ROWS, COLS};
  int64_t offset[2];
  CHECK(weft_mesh_local_shape(mesh, layout, 2, global, -1, local, offset));
  *data = calloc((size_t)(local[0] * local[1]) + 1, sizeof(float));
  for (int64_t i = 0; fill && i < local[0]; ++i)
    for (int64_t j = 0; j < local[1]; ++j) (*data)[i * local[1] + j] = value_at(offset[0] + i, offset[1] + j);
  weft_tensor_t view = {*data, WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT32, local, NULL, 0};
  weft_sharded_t t;
  CHECK(weft_sharded_create(mesh, 2, global, WEFT_FLOAT32, layout, &view, NULL, &t));
  return t;
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

  /* Stored: rows split over both dims ("dp" outer, "tp" inner). Wanted: columns split over "tp",
   * replicated over "dp". */
  const weft_placement_t stored[2] = {{WEFT_SHARD, 0, WEFT_SUM}, {WEFT_SHARD, 0, WEFT_SUM}};
  const weft_placement_t wanted[2] = {{WEFT_REPLICATE, 0, WEFT_SUM}, {WEFT_SHARD, 1, WEFT_SUM}};
  float *src_data, *dst_data;
  int64_t src_shape[2], dst_shape[2];
  weft_sharded_t src = make(mesh, stored, 1, &src_data, src_shape);
  weft_sharded_t dst = make(mesh, wanted, 0, &dst_data, dst_shape);

  weft_redistribute_step_t steps[8];
  size_t nsteps;
  CHECK(weft_redistribute_plan(src, dst, steps, 8, &nsteps));
  static const char *kinds[] = {"local", "allgather", "allreduce", "reduce_scatter", "alltoall", "exchange"};
  for (size_t s = 0; rank == 0 && s < nsteps && s < 8; ++s)
    printf("step %zu: %s on mesh dim %d, rank 0 sends %llu bytes (most: %llu)\n", s, kinds[steps[s].kind],
           steps[s].mesh_dim, (unsigned long long)steps[s].bytes_sent, (unsigned long long)steps[s].max_bytes_sent);
  CHECK(weft_redistribute(src, dst, NULL, NULL));

  const int64_t global[2] = {ROWS, COLS};
  int64_t offset[2];
  CHECK(weft_mesh_local_shape(mesh, wanted, 2, global, -1, NULL, offset));
  int wrong = 0;
  for (int64_t i = 0; i < dst_shape[0]; ++i)
    for (int64_t j = 0; j < dst_shape[1]; ++j) wrong += dst_data[i * dst_shape[1] + j] != value_at(offset[0] + i, offset[1] + j);
  printf("rank %d (dp %d, tp %d): holds %lldx%lld from column %lld: %s\n", rank, coords[0], coords[1],
         (long long)dst_shape[0], (long long)dst_shape[1], (long long)offset[1], wrong ? "WRONG" : "correct");

  CHECK(weft_sharded_destroy(src));
  CHECK(weft_sharded_destroy(dst));
  free(src_data);
  free(dst_data);
  CHECK(weft_mesh_destroy(mesh));
  CHECK(weft_comm_destroy(comm));
  return wrong ? 1 : 0;
}
