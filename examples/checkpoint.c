/* Save a sharded tensor from every rank, then load it back on half of the ranks in another
 * layout: the distributed checkpoint's "save on N, load on M". Checks every element against the
 * global tensor, a function of its index, and prints what weft-ckpt would show. Run it with:
 *   build/bin/weftrun -n 4 build/bin/checkpoint_example [DIR]
 * then inspect DIR (default /tmp/weft-checkpoint-example) with build/bin/weft-ckpt info DIR. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <weft/weft.h>

#include "example_check.h"

enum { ROWS = 10, COLS = 7 };

static double value_at(int64_t i, int64_t j) { return (double)i * 1000.0 + (double)j; }

/* A tensor on `mesh` in `layout` over fresh memory, filled from the global tensor if asked. */
static weft_sharded_t make(weft_mesh_t mesh, const weft_placement_t *layout, int fill, double **data,
                           int64_t local[2], int64_t offset[2]) {
  const int64_t global[2] = {ROWS, COLS};
  CHECK(weft_mesh_local_shape(mesh, layout, 2, global, -1, local, offset));
  *data = calloc((size_t)(local[0] * local[1]) + 1, sizeof(double));
  for (int64_t i = 0; fill && i < local[0]; ++i)
    for (int64_t j = 0; j < local[1]; ++j) (*data)[i * local[1] + j] = value_at(offset[0] + i, offset[1] + j);
  weft_tensor_t view = {*data, WEFT_DEVICE_CPU, 0, 2, WEFT_FLOAT64, local, NULL, 0};
  weft_sharded_t t;
  CHECK(weft_sharded_create(mesh, 2, global, WEFT_FLOAT64, layout, &view, NULL, &t));
  return t;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/tmp/weft-checkpoint-example";
  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, NULL));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));

  /* Save: rows sharded over every rank. */
  weft_mesh_t all;
  CHECK(weft_mesh_create(comm, 1, &size, NULL, NULL, &all));
  const weft_placement_t rows = {WEFT_SHARD, 0, WEFT_SUM};
  double *saved;
  int64_t shape[2], offset[2];
  weft_sharded_t w = make(all, &rows, 1, &saved, shape, offset);
  const char *names[1] = {"weight"};
  CHECK(weft_checkpoint_save(comm, dir, names, &w, 1, NULL));

  /* Load: columns sharded over the first half of the ranks (every rank takes part in making the
   * mesh; the others get a descriptor and load nothing). */
  int half = size > 1 ? size / 2 : 1;
  int *ranks = malloc(sizeof(int) * (size_t)half);
  for (int r = 0; r < half; ++r) ranks[r] = r;
  weft_mesh_config_t cfg = WEFT_MESH_CONFIG_INIT;
  cfg.ranks = ranks;
  cfg.nranks = (size_t)half;
  weft_mesh_t some;
  CHECK(weft_mesh_create(comm, 1, &half, NULL, &cfg, &some));
  int member;
  CHECK(weft_mesh_is_member(some, &member));
  int wrong = 0;
  if (member) {
    const weft_placement_t cols = {WEFT_SHARD, 1, WEFT_SUM};
    double *loaded;
    weft_sharded_t v = make(some, &cols, 0, &loaded, shape, offset);
    CHECK(weft_checkpoint_load(dir, names, &v, 1, NULL));
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j) wrong += loaded[i * shape[1] + j] != value_at(offset[0] + i, offset[1] + j);
    printf("rank %d: loaded columns %lld..%lld of %s on %d of %d ranks: %s\n", rank, (long long)offset[1],
           (long long)(offset[1] + shape[1]), dir, half, size, wrong ? "WRONG" : "correct");
    CHECK(weft_sharded_destroy(v));
    free(loaded);
  }
  if (rank == 0) {
    weft_checkpoint_t ck;
    CHECK(weft_checkpoint_open(dir, &ck));
    CHECK(weft_checkpoint_verify(ck));
    size_t nshards;
    CHECK(weft_checkpoint_tensor(ck, 0, NULL, NULL, NULL, NULL, &nshards));
    printf("checkpoint %s: 'weight' in %zu shards, every checksum verified\n", dir, nshards);
    CHECK(weft_checkpoint_close(ck));
  }

  CHECK(weft_sharded_destroy(w));
  free(saved);
  free(ranks);
  CHECK(weft_mesh_destroy(some));
  CHECK(weft_mesh_destroy(all));
  CHECK(weft_comm_destroy(comm));
  return wrong ? 1 : 0;
}
