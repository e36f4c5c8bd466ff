/* An old caller: compiled against the headers of the oldest release with this ABI version
 * (abi/v1/include, the baseline scripts/check-abi compares against), linked and run against the
 * newest libweft.so. Its option structs carry the old struct_size; the library must accept them
 * and give any newer fields their defaults. Run by ctest abi.old_caller through weftrun at 2 ranks:
 * a failure here means a release broke callers built against an older one. */
#include <stdio.h>
#include <weft/weft.h>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    weft_status_t st_ = (call);                                                                   \
    if (st_ != WEFT_OK) {                                                                         \
      fprintf(stderr, "old caller: %s failed: %s\n  %s\n", #call, weft_status_string(st_), weft_last_error()); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

int main(void) {
  int version = 0, abi = 0;
  CHECK(weft_version(&version, &abi));
  if (abi != WEFT_ABI_VERSION) {
    fprintf(stderr, "old caller: built for ABI %d, the library has ABI %d\n", WEFT_ABI_VERSION, abi);
    return 1;
  }
  if (version < WEFT_VERSION_CODE) {
    fprintf(stderr, "old caller: the library (%d) is older than the headers (%d)\n", version, WEFT_VERSION_CODE);
    return 1;
  }

  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT; /* the old struct_size */
  cfg.timeout_ms = 60000;
  cfg.name = "old-caller";
  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, &cfg));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));

  /* Sum of (rank + 1) * (i + 1) over ranks: size (size + 1) / 2 * (i + 1), exact in doubles. */
  double values[5];
  for (int i = 0; i < 5; ++i) values[i] = (double)(rank + 1) * (double)(i + 1);
  CHECK(weft_allreduce(values, values, 5, WEFT_FLOAT64, WEFT_SUM, comm, NULL, NULL));
  int ok = 1;
  for (int i = 0; i < 5; ++i) ok &= values[i] == (double)size * (double)(size + 1) / 2.0 * (double)(i + 1);

  /* A split keeps working with the old caller's view of the communicator. */
  weft_comm_t half;
  CHECK(weft_comm_split(comm, rank % 2, rank, &half, &cfg));
  int half_size;
  CHECK(weft_comm_size(half, &half_size));
  ok &= half_size == (size - rank % 2 + 1) / 2;

  /* A mesh over the world with the old mesh options. */
  weft_mesh_config_t mcfg = WEFT_MESH_CONFIG_INIT;
  weft_mesh_t mesh;
  const int shape[1] = {size};
  const char *names[1] = {"dp"};
  CHECK(weft_mesh_create(comm, 1, shape, names, &mcfg, &mesh));
  CHECK(weft_mesh_destroy(mesh));

  printf("old caller, rank %d of %d: ABI %d, library %d: %s\n", rank, size, abi, version, ok ? "correct" : "WRONG");
  CHECK(weft_comm_destroy(half));
  CHECK(weft_comm_destroy(comm));
  return ok ? 0 : 1;
}
