/* The smallest complete weft program: every rank contributes its rank + 1, the allreduce
 * sums them, and every rank checks n(n+1)/2. Run it with:  build/bin/weftrun -n 4 build/bin/allreduce_example */
#include <stdio.h>
#include <weft/weft.h>

#include "example_check.h"

int main(void) {
  weft_comm_t comm;
  CHECK(weft_comm_init_from_env(&comm, NULL));
  int rank, size;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &size));

  float values[4];
  for (int i = 0; i < 4; ++i) values[i] = (float)(rank + 1) * (float)(i + 1);
  CHECK(weft_allreduce(values, values, 4, WEFT_FLOAT32, WEFT_SUM, comm, NULL, NULL));

  float expected = (float)size * (float)(size + 1) / 2.0f;
  int ok = 1;
  for (int i = 0; i < 4; ++i) ok &= values[i] == expected * (float)(i + 1);
  printf("rank %d of %d: allreduce sum = [%g %g %g %g] %s\n", rank, size, values[0], values[1], values[2],
         values[3], ok ? "correct" : "WRONG");
  CHECK(weft_comm_destroy(comm));
  return ok ? 0 : 1;
}
