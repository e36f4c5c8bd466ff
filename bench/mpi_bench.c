/*
 * mpi_bench: the MPI peer of weft-bench, for bench/compare-host.
 *
 * Same sizes, same timing rule and same CSV rows as weft-bench, float32 and MPI_SUM only:
 * for each size, warmup iterations, MPI_Barrier, timed iterations; each rank's average time per
 * iteration is reduced with MPI_MAX (the slowest rank's). Sizes follow nccl-tests: the whole
 * message, rounded down to a multiple of nranks elements for the block collectives.
 * Then (unless --check 0) one run on fresh inputs is checked exactly (small integers).
 *
 *   mpicc -O2 -o mpi_bench bench/mpi_bench.c
 *   mpirun -np 2 ./mpi_bench -c allreduce,allgather -b 4K -e 64M -f 4 -n 20 -w 5 --csv out.csv
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, ALLTOALL, BROADCAST, REDUCE, SENDRECV, NCOLLS };
static const char *const coll_names[NCOLLS] = {"allreduce", "allgather", "reduce_scatter", "alltoall",
                                               "broadcast", "reduce",    "sendrecv"};

struct options {
  int colls[NCOLLS];
  int ncolls;
  size_t min_bytes, max_bytes;
  double factor;
  int iters, warmup, check;
  const char *csv;
};

static int rank, nranks;

static void usage_exit(const char *why) {
  if (rank == 0)
    fprintf(stderr,
            "mpi_bench: %s\nusage: mpirun -np N mpi_bench [-c LIST] [-b SIZE] [-e SIZE] [-f F] [-n N] "
            "[-w N] [--check 0|1] [--csv FILE]\n  LIST: comma-separated of allreduce, allgather, "
            "reduce_scatter, alltoall, broadcast, reduce, sendrecv\n",
            why);
  MPI_Finalize();
  exit(2);
}

static size_t parse_size(const char *s) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno) usage_exit("bad size");
  unsigned long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end) usage_exit("bad size suffix (K, M or G)");
  return (size_t)(v * mult);
}

static int parse_int(const char *s) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < 0 || v > 1000000000) usage_exit("bad number");
  return (int)v;
}

static void parse_colls(struct options *o, char *list) {
  o->ncolls = 0;
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int found = -1;
    for (int c = 0; c < NCOLLS; ++c)
      if (strcmp(tok, coll_names[c]) == 0) found = c;
    if (found < 0) usage_exit("unknown collective");
    o->colls[o->ncolls++] = found;
    if (o->ncolls == NCOLLS) break;
  }
  if (o->ncolls == 0) usage_exit("no collective");
}

static void parse(struct options *o, int argc, char **argv) {
  static char default_list[] = "allreduce";
  memset(o, 0, sizeof *o);
  o->min_bytes = o->max_bytes = 32u << 20;
  o->factor = 2;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  parse_colls(o, default_list);
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (i + 1 >= argc) usage_exit("option needs a value");
    char *v = argv[++i];
    if (!strcmp(a, "-c")) parse_colls(o, v);
    else if (!strcmp(a, "-b")) o->min_bytes = parse_size(v);
    else if (!strcmp(a, "-e")) o->max_bytes = parse_size(v);
    else if (!strcmp(a, "-f")) {
      o->factor = strtod(v, NULL);
      if (!(o->factor > 1)) usage_exit("-f must be > 1");
    } else if (!strcmp(a, "-n")) o->iters = parse_int(v);
    else if (!strcmp(a, "-w")) o->warmup = parse_int(v);
    else if (!strcmp(a, "--check")) o->check = parse_int(v) != 0;
    else if (!strcmp(a, "--csv")) o->csv = v;
    else usage_exit("unknown option");
  }
  if (o->iters < 1) usage_exit("-n must be at least 1");
}

/* Inputs: small integers, so float sums are exact whatever the order. */
static float reduce_input(int r, size_t i) { return (float)(((size_t)r * 3 + i * 5 + 1) % 8); }
static float pattern(int r, size_t i) { return (float)(((size_t)r * 131 + i * 7 + 3) % ((1u << 20) + 1)); }
static int is_reduction(int c) { return c == ALLREDUCE || c == REDUCE_SCATTER || c == REDUCE; }

struct shape {
  size_t param, sendcount, recvcount, count, bytes;
};

static struct shape shape_of(int c, size_t bytes) {
  struct shape s;
  size_t total = bytes / sizeof(float), n = (size_t)nranks;
  switch (c) {
    case ALLGATHER:
      s.param = total / n;
      s.sendcount = s.param;
      s.recvcount = s.count = s.param * n;
      break;
    case REDUCE_SCATTER:
      s.param = total / n;
      s.sendcount = s.count = s.param * n;
      s.recvcount = s.param;
      break;
    case ALLTOALL:
      s.param = total / n;
      s.sendcount = s.recvcount = s.count = s.param * n;
      break;
    default:
      s.param = s.sendcount = s.recvcount = s.count = total;
  }
  s.bytes = s.count * sizeof(float);
  return s;
}

static double bus_factor(int c) {
  double n = nranks;
  switch (c) {
    case ALLREDUCE: return 2 * (n - 1) / n;
    case ALLGATHER:
    case REDUCE_SCATTER:
    case ALLTOALL: return (n - 1) / n;
    default: return 1;
  }
}

static void run_once(int c, const struct shape *s, float *send, float *recv) {
  int p = (int)s->param;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  switch (c) {
    case ALLREDUCE: MPI_Allreduce(send, recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(send, p, MPI_FLOAT, recv, p, MPI_FLOAT, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER: MPI_Reduce_scatter_block(send, recv, p, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(send, p, MPI_FLOAT, recv, p, MPI_FLOAT, MPI_COMM_WORLD); break;
    case BROADCAST: MPI_Bcast(rank == 0 ? send : recv, p, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(send, recv, p, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case SENDRECV:
      MPI_Sendrecv(send, p, MPI_FLOAT, next, 0, recv, p, MPI_FLOAT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      break;
  }
}

static float reduced(size_t i) {
  float acc = 0;
  for (int r = 0; r < nranks; ++r) acc += reduce_input(r, i);
  return acc;
}

static long long check_once(int c, const struct shape *s, float *send, float *recv) {
  size_t p = s->param, self = (size_t)rank;
  for (size_t i = 0; i < s->sendcount; ++i)
    send[i] = is_reduction(c) ? reduce_input(rank, i) : c == BROADCAST ? pattern(0, i) : pattern(rank, i);
  memset(recv, 0xFF, s->recvcount * sizeof(float));
  run_once(c, s, send, recv);
  long long wrong = 0;
  switch (c) {
    case ALLREDUCE:
      for (size_t i = 0; i < p; ++i) wrong += recv[i] != reduced(i);
      break;
    case REDUCE:
      if (rank == 0)
        for (size_t i = 0; i < p; ++i) wrong += recv[i] != reduced(i);
      break;
    case REDUCE_SCATTER:
      for (size_t i = 0; i < p; ++i) wrong += recv[i] != reduced(self * p + i);
      break;
    case ALLGATHER:
      for (size_t j = 0; j < s->recvcount; ++j) wrong += recv[j] != pattern((int)(j / p), j % p);
      break;
    case ALLTOALL:
      for (size_t j = 0; j < s->recvcount; ++j) wrong += recv[j] != pattern((int)(j / p), self * p + j % p);
      break;
    case BROADCAST:
      if (rank != 0)
        for (size_t i = 0; i < p; ++i) wrong += recv[i] != pattern(0, i);
      break;
    case SENDRECV:
      for (size_t i = 0; i < p; ++i) wrong += recv[i] != pattern((rank + nranks - 1) % nranks, i);
      break;
  }
  long long all = 0;
  MPI_Allreduce(&wrong, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  struct options o;
  parse(&o, argc, argv);
  if (o.max_bytes / sizeof(float) > (size_t)nranks * 0x7fffffffu) usage_exit("-e too large for int counts");

  size_t cap = o.max_bytes / sizeof(float) + 1;
  float *send = aligned_alloc(4096, (cap * sizeof(float) + 4095) / 4096 * 4096);
  float *recv = aligned_alloc(4096, (cap * sizeof(float) + 4095) / 4096 * 4096);
  if (!send || !recv) usage_exit("out of memory");
  memset(send, 0, cap * sizeof(float));
  memset(recv, 0, cap * sizeof(float));

  FILE *csv = NULL;
  if (rank == 0 && o.csv) {
    csv = fopen(o.csv, "w");
    if (csv) fprintf(csv, "library,collective,nranks,bytes,count,dtype,time_us,algbw,busbw,wrong\n");
  }
  const char *lib = "openmpi";
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    char *nl = strchr(version, '\n');
    if (nl) *nl = 0;
    if (!strstr(version, "Open MPI")) lib = "mpi";
    printf("# mpi_bench: %s\n# nRanks %d minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d "
           "validation: %d\n",
           version, nranks, o.min_bytes, o.max_bytes, o.factor, o.warmup, o.iters, o.check);
  }
  long long total_wrong = 0;
  double bw_sum = 0;
  int bw_count = 0;
  for (int k = 0; k < o.ncolls; ++k) {
    int c = o.colls[k];
    if (rank == 0) {
      printf("#\n# Collective: %s\n#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", coll_names[c], "size", "count",
             "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
      printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
             "(GB/s)", "");
    }
    for (size_t b = o.min_bytes; b <= o.max_bytes;) {
      struct shape s = shape_of(c, b);
      for (size_t i = 0; i < s.sendcount; ++i) send[i] = is_reduction(c) ? reduce_input(rank, i) : pattern(rank, i);
      for (int i = 0; i < o.warmup; ++i) run_once(c, &s, send, recv);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < o.iters; ++i) run_once(c, &s, send, recv);
      double mine = (MPI_Wtime() - t0) / o.iters * 1e6, slowest = 0;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      long long wrong = o.check ? check_once(c, &s, send, recv) : -1;
      if (wrong > 0) total_wrong += wrong;
      double algbw = slowest > 0 ? (double)s.bytes / (slowest * 1e-6) / 1e9 : 0;
      double busbw = algbw * bus_factor(c);
      bw_sum += busbw;
      ++bw_count;
      if (rank == 0) {
        char wrong_s[24];
        if (wrong < 0) snprintf(wrong_s, sizeof wrong_s, "N/A");
        else snprintf(wrong_s, sizeof wrong_s, "%lld", wrong);
        printf("%12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6s\n", s.bytes, s.count, "float",
               is_reduction(c) ? "sum" : "none", (c == BROADCAST || c == REDUCE) ? 0 : -1, slowest, algbw, busbw,
               wrong_s);
        fflush(stdout);
        if (csv) {
          fprintf(csv, "%s,%s,%d,%zu,%zu,float,%.3f,%.6f,%.6f,%lld\n", lib, coll_names[c], nranks, s.bytes, s.count,
                  slowest, algbw, busbw, wrong);
          fflush(csv);
        }
      }
      size_t next = (size_t)((double)b * o.factor);
      b = next > b ? next : b + 1;
    }
  }
  if (rank == 0) {
    printf("# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %g \n#\n", total_wrong,
           total_wrong ? "FAILED" : "OK", bw_count ? bw_sum / bw_count : 0.0);
  }
  if (csv) fclose(csv);
  free(send);
  free(recv);
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
