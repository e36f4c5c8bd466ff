/*
 * checkpoint-bench: weft_checkpoint_save / weft_checkpoint_load throughput against writing and
 * reading the same bytes with one write() / read() per shard (issue 11). Public C ABI only.
 *
 *   build/bin/weftrun -n 2 build/bin/checkpoint-bench                  # 512 MiB, fsync on, 3 repeats
 *   build/bin/weftrun -n 4 build/bin/checkpoint-bench --fsync 0 --dir /dev/shm
 *
 * Workload: `-t` float32 tensors of `-s` bytes together, each [rows, cols] with rows and cols
 * multiples of the rank count, sharded S(0) on a 1-d mesh of all ranks (even shards), plus one
 * replicated tensor (`--replicated`), which the checkpoint stores once. Per repeat, in a fresh
 * directory under a temporary directory made in `--dir` (removed at the end):
 *   save      weft_checkpoint_save of every tensor
 *   write     the baseline: each rank writes the bytes it wrote in `save` into a file of its own
 *             with one write() per shard (then fsync, when --fsync 1)
 *   load      weft_checkpoint_load back into the same layout
 *   read      the baseline: each rank reads what `load` fills, one read() per shard (its own
 *             shards from its own file; the replicated tensor from rank 0's file)
 *   load S(1) weft_checkpoint_load into S(1) (each rank reads a column block of every stored
 *             shard: partial boxes)
 * weft and the baseline alternate which goes first from repeat to repeat. Each timed region is
 * syncfs (rank 0, untimed: earlier dirty data is not flushed inside it), barrier, the work, barrier;
 * its time is the slowest rank's. GB/s = global bytes (every tensor once, 10^9 B) / time. The
 * page cache is not dropped (that needs privileges): loads and reads come from the page cache.
 * Every element of every load (weft and baseline) is checked in every repeat: exit 1 when one
 * is wrong, 2 for bad usage, 3 when a weft or system call failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <weft/weft.h>

#define MAX_TENSORS 64
#define MAX_REPEATS 100
#define PATH_BYTES 4096

enum phase { SAVE, WRITE, LOAD, READ, LOAD_S1, NPHASES };
static const char *const kPhaseNames[NPHASES] = {"save", "write", "load", "read", "load_s1"};

static int g_rank = 0;
static char g_root[PATH_BYTES]; /* the temporary directory (rank 0 removes it) */

static void remove_tree(const char *path);

__attribute__((format(printf, 2, 3), noreturn)) static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "checkpoint-bench: rank %d: ", g_rank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (g_rank == 0 && g_root[0]) remove_tree(g_root); /* best effort */
  exit(code);
}

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    weft_status_t st_ = (call);                                                                       \
    if (st_ != WEFT_OK) die(3, "%s failed: %s\n  %s", #call, weft_status_string(st_), weft_last_error()); \
  } while (0)

/* ------------------------------------------------------------------ options */

typedef struct options {
  uint64_t size;       /* bytes of the sharded tensors together */
  int tensors;         /* how many sharded tensors */
  int64_t cols;        /* 0 = near square */
  uint64_t replicated; /* bytes of the replicated tensor; 0 = none */
  int repeat;
  int fsync;
  const char *dir;
  const char *csv;
} options_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: weftrun -n N checkpoint-bench [options]\n"
          "  -s, --size SIZE        bytes of the sharded tensors together, K/M/G suffixes (512M)\n"
          "  -t, --tensors N        number of sharded float32 tensors, S(0) (8)\n"
          "      --cols C           columns of each tensor, rounded down to a multiple of N (near square)\n"
          "      --replicated SIZE  bytes of the one replicated tensor, 0 = none (8M)\n"
          "  -n, --repeat N         repeats; the summary shows medians (3)\n"
          "      --fsync 0|1        weft_checkpoint_config_t.fsync, and fsync in the baseline (1)\n"
          "      --dir DIR          where the temporary directory is made (/tmp); it is removed after\n"
          "      --csv FILE         also append one row per repeat and phase to FILE\n"
          "  -h, --help             this text\n");
}

static uint64_t parse_size(const char *flag, const char *s) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno != 0) goto bad;
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  if (*end != '\0' || v > (UINT64_MAX >> 31)) goto bad;
  return v * mult;
bad:
  fprintf(stderr, "checkpoint-bench: %s expects a size like 512M, got '%s'\n", flag, s);
  exit(2);
}

static long parse_int(const char *flag, const char *s, long lo, long hi) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) {
    fprintf(stderr, "checkpoint-bench: %s expects a whole number in [%ld, %ld], got '%s'\n", flag, lo, hi, s);
    exit(2);
  }
  return v;
}

static options_t parse_options(int argc, char **argv) {
  options_t o = {512ull << 20, 8, 0, 8ull << 20, 3, 1, "/tmp", NULL};
  enum { OPT_COLS = 256, OPT_REPLICATED, OPT_FSYNC, OPT_DIR, OPT_CSV };
  static const struct option longs[] = {{"size", required_argument, NULL, 's'},
                                        {"tensors", required_argument, NULL, 't'},
                                        {"cols", required_argument, NULL, OPT_COLS},
                                        {"replicated", required_argument, NULL, OPT_REPLICATED},
                                        {"repeat", required_argument, NULL, 'n'},
                                        {"fsync", required_argument, NULL, OPT_FSYNC},
                                        {"dir", required_argument, NULL, OPT_DIR},
                                        {"csv", required_argument, NULL, OPT_CSV},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "s:t:n:h", longs, NULL)) != -1) {
    switch (c) {
      case 's': o.size = parse_size("--size", optarg); break;
      case 't': o.tensors = (int)parse_int("--tensors", optarg, 1, MAX_TENSORS); break;
      case OPT_COLS: o.cols = parse_int("--cols", optarg, 1, 1L << 40); break;
      case OPT_REPLICATED: o.replicated = parse_size("--replicated", optarg); break;
      case 'n': o.repeat = (int)parse_int("--repeat", optarg, 1, MAX_REPEATS); break;
      case OPT_FSYNC: o.fsync = (int)parse_int("--fsync", optarg, 0, 1); break;
      case OPT_DIR: o.dir = optarg; break;
      case OPT_CSV: o.csv = optarg; break;
      case 'h': usage(stdout); exit(0);
      default: usage(stderr); exit(2);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "checkpoint-bench: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    exit(2);
  }
  return o;
}

/* ------------------------------------------------------------------ small helpers */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Element g (row-major global index) of tensor t: a whole number below 2^24, exact in float32. */
static float value_at(int t, uint64_t g) {
  return (float)((g * 2654435761u + (uint64_t)t * 40503u + 12345u) & 0xFFFFFFu);
}

static void *xalloc(size_t bytes) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) die(3, "cannot allocate %zu bytes", bytes);
  return p;
}

/* snprintf into a PATH_BYTES buffer; a path that does not fit is an error, not a truncation. */
__attribute__((format(printf, 2, 3))) static void fmt_path(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(out, PATH_BYTES, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= PATH_BYTES) die(3, "a path is longer than %d bytes", PATH_BYTES - 1);
}

static void remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    char child[PATH_BYTES];
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      fmt_path(child, "%s/%s", path, e->d_name);
      struct stat st;
      if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) {
        remove_tree(child);
      } else {
        unlink(child);
      }
    }
    closedir(d);
  }
  rmdir(path);
}

/* Bytes in the files of a directory (one level). */
static uint64_t dir_bytes(const char *path, int *files) {
  uint64_t total = 0;
  *files = 0;
  DIR *d = opendir(path);
  if (!d) die(3, "cannot list %s: %s", path, strerror(errno));
  struct dirent *e;
  char child[PATH_BYTES];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    fmt_path(child, "%s/%s", path, e->d_name);
    struct stat st;
    if (stat(child, &st) == 0 && S_ISREG(st.st_mode)) {
      total += (uint64_t)st.st_size;
      ++*files;
    }
  }
  closedir(d);
  return total;
}

static const char *fs_name(long type) {
  switch ((unsigned long)type) {
    case 0xEF53: return "ext2/ext3/ext4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794C7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    case 0x2FC12FC1: return "zfs";
    default: return "other";
  }
}

/* rchar and wchar of /proc/self/io: bytes passed to read-like and write-like system calls. */
static void io_counters(uint64_t *rchar, uint64_t *wchar) {
  *rchar = *wchar = 0;
  FILE *f = fopen("/proc/self/io", "r");
  if (!f) return;
  char line[256];
  unsigned long long v;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "rchar: %llu", &v) == 1) *rchar = v;
    if (sscanf(line, "wchar: %llu", &v) == 1) *wchar = v;
  }
  fclose(f);
}

static void write_all(int fd, const void *buf, size_t n, const char *path, long *calls) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    ++*calls;
    if (w < 0) {
      if (errno == EINTR) continue;
      die(3, "write %s: %s", path, strerror(errno));
    }
    p += w;
    n -= (size_t)w;
  }
}

static void read_all(int fd, void *buf, size_t n, off_t offset, const char *path, long *calls) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = offset < 0 ? read(fd, p, n) : pread(fd, p, n, offset);
    ++*calls;
    if (r < 0) {
      if (errno == EINTR) continue;
      die(3, "read %s: %s", path, strerror(errno));
    }
    if (r == 0) die(3, "read %s: file ends %zu bytes early", path, n);
    p += r;
    n -= (size_t)r;
    if (offset >= 0) offset += r;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double s[MAX_REPEATS];
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* ------------------------------------------------------------------ the benchmark */

typedef struct tensor_set {
  weft_sharded_t handle[MAX_TENSORS + 1];
  float *data[MAX_TENSORS + 1];
  int64_t shape[MAX_TENSORS + 1][2];
  int64_t offset[MAX_TENSORS + 1][2];
  size_t bytes[MAX_TENSORS + 1];
} tensor_set_t;

typedef struct bench {
  options_t o;
  weft_comm_t comm;
  weft_mesh_t mesh;
  int rank, size;
  int ntensors;     /* sharded tensors */
  int nall;         /* with the replicated one */
  int64_t rows, cols, rep_elems;
  uint64_t global_bytes;
  const char *names[MAX_TENSORS + 1];
  char name_storage[MAX_TENSORS + 1][32];
  tensor_set_t src, dst0, dst1;
} bench_t;

static void barrier(bench_t *b) { CHECK(weft_barrier(b->comm, NULL, NULL)); }

static double max_over_ranks(bench_t *b, double v) {
  double out;
  CHECK(weft_allreduce(&v, &out, 1, WEFT_FLOAT64, WEFT_MAX, b->comm, NULL, NULL));
  return out;
}

static uint64_t sum_over_ranks(bench_t *b, uint64_t v) {
  uint64_t out;
  CHECK(weft_allreduce(&v, &out, 1, WEFT_UINT64, WEFT_SUM, b->comm, NULL, NULL));
  return out;
}

/* Makes the handles of one layout: tensors 0..ntensors-1 sharded along `dim`, the last replicated. */
static void make_set(bench_t *b, tensor_set_t *s, int dim, int fill) {
  for (int t = 0; t < b->nall; ++t) {
    const int replicated = t == b->ntensors;
    const int ndim = replicated ? 1 : 2;
    const int64_t global[2] = {replicated ? b->rep_elems : b->rows, b->cols};
    weft_placement_t p = {replicated ? WEFT_REPLICATE : WEFT_SHARD, dim, WEFT_SUM};
    int64_t off[2] = {0, 0};
    s->shape[t][1] = 1;
    CHECK(weft_mesh_local_shape(b->mesh, &p, ndim, global, -1, s->shape[t], off));
    s->offset[t][0] = off[0];
    s->offset[t][1] = off[1];
    const size_t n = (size_t)(s->shape[t][0] * s->shape[t][1]);
    s->bytes[t] = n * sizeof(float);
    s->data[t] = xalloc(s->bytes[t]);
    if (fill) {
      for (int64_t i = 0; i < s->shape[t][0]; ++i) {
        float *row = s->data[t] + i * s->shape[t][1];
        const uint64_t g0 = replicated ? 0 : (uint64_t)((off[0] + i) * b->cols + off[1]);
        for (int64_t j = 0; j < s->shape[t][1]; ++j) row[j] = value_at(t, replicated ? (uint64_t)(i + j) : g0 + (uint64_t)j);
      }
    }
    weft_tensor_t view = {s->data[t], WEFT_DEVICE_CPU, 0, ndim, WEFT_FLOAT32, s->shape[t], NULL, 0};
    weft_sharded_config_t cfg = WEFT_SHARDED_CONFIG_INIT;
    cfg.name = b->names[t];
    CHECK(weft_sharded_create(b->mesh, ndim, global, WEFT_FLOAT32, &p, &view, &cfg, &s->handle[t]));
  }
}

static void free_set(bench_t *b, tensor_set_t *s) {
  for (int t = 0; t < b->nall; ++t) {
    CHECK(weft_sharded_destroy(s->handle[t]));
    free(s->data[t]);
  }
}

/* Fills the set with a pattern no value_at() produces (NaN), so a load that skips an element fails. */
static void poison(bench_t *b, tensor_set_t *s) {
  for (int t = 0; t < b->nall; ++t) memset(s->data[t], 0xFF, s->bytes[t]);
}

/* Wrong elements in the set, every element compared; prints the first few. */
static uint64_t check_set(bench_t *b, const tensor_set_t *s, const char *what, int rep) {
  uint64_t wrong = 0;
  for (int t = 0; t < b->nall; ++t) {
    const int replicated = t == b->ntensors;
    for (int64_t i = 0; i < s->shape[t][0]; ++i) {
      const float *row = s->data[t] + i * s->shape[t][1];
      const uint64_t g0 = replicated ? (uint64_t)i : (uint64_t)((s->offset[t][0] + i) * b->cols + s->offset[t][1]);
      for (int64_t j = 0; j < s->shape[t][1]; ++j) {
        const float want = value_at(t, g0 + (uint64_t)j);
        if (row[j] != want) {
          if (wrong < 5)
            fprintf(stderr, "checkpoint-bench: rank %d: %s (repeat %d): tensor '%s' local [%lld, %lld] is %g, expected %g\n",
                    b->rank, what, rep, b->names[t], (long long)i, (long long)j, (double)row[j], (double)want);
          ++wrong;
        }
      }
    }
  }
  return wrong;
}

/* Whether this rank writes tensor t in weft_checkpoint_save (the replicated one: rank 0 only). */
static int writes(const bench_t *b, int t) { return t < b->ntensors || b->rank == 0; }

typedef struct timed {
  double t0;
  uint64_t r0, w0;
} timed_t;

static timed_t begin(bench_t *b) {
  if (b->rank == 0) { /* earlier phases' dirty pages are flushed here, not inside the timed region */
    int fd = open(g_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      syncfs(fd);
      close(fd);
    }
  }
  barrier(b);
  timed_t t;
  io_counters(&t.r0, &t.w0);
  t.t0 = now();
  return t;
}

/* The slowest rank's time; adds the bytes all ranks read and wrote through system calls. */
static double end(bench_t *b, timed_t t, uint64_t *rbytes, uint64_t *wbytes) {
  const double mine = now() - t.t0;
  barrier(b);
  uint64_t r1, w1;
  io_counters(&r1, &w1);
  *rbytes = sum_over_ranks(b, r1 - t.r0);
  *wbytes = sum_over_ranks(b, w1 - t.w0);
  return max_over_ranks(b, mine);
}

static void baseline_write(bench_t *b, const char *dir, long *calls) {
  char path[PATH_BYTES];
  fmt_path(path, "%s/r%d.bin", dir, b->rank);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) die(3, "create %s: %s", path, strerror(errno));
  for (int t = 0; t < b->nall; ++t)
    if (writes(b, t)) write_all(fd, b->src.data[t], b->src.bytes[t], path, calls);
  if (b->o.fsync && fsync(fd) != 0) die(3, "fsync %s: %s", path, strerror(errno));
  if (close(fd) != 0) die(3, "close %s: %s", path, strerror(errno));
}

static void baseline_read(bench_t *b, const char *dir, long *calls) {
  char path[PATH_BYTES];
  fmt_path(path, "%s/r%d.bin", dir, b->rank);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) die(3, "open %s: %s", path, strerror(errno));
  for (int t = 0; t < b->nall; ++t)
    if (writes(b, t)) read_all(fd, b->dst0.data[t], b->dst0.bytes[t], -1, path, calls);
  close(fd);
  if (b->nall > b->ntensors && b->rank != 0) { /* the replicated tensor, from rank 0's file */
    fmt_path(path, "%s/r0.bin", dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(3, "open %s: %s", path, strerror(errno));
    off_t at = 0; /* rank 0 wrote its shards first: even shards, the same size as this rank's */
    for (int t = 0; t < b->ntensors; ++t) at += (off_t)b->src.bytes[t];
    read_all(fd, b->dst0.data[b->ntensors], b->dst0.bytes[b->ntensors], at, path, calls);
    close(fd);
  }
}

static void make_dir(const char *path) {
  if (mkdir(path, 0755) != 0) die(3, "mkdir %s: %s", path, strerror(errno));
}

int main(int argc, char **argv) {
  bench_t b;
  memset(&b, 0, sizeof b);
  b.o = parse_options(argc, argv);
  CHECK(weft_comm_init_from_env(&b.comm, NULL));
  CHECK(weft_comm_rank(b.comm, &b.rank));
  CHECK(weft_comm_size(b.comm, &b.size));
  g_rank = b.rank;
  const int n = b.size;

  /* Geometry: rows and cols multiples of n (even shards in S(0) and in S(1)). */
  b.ntensors = b.o.tensors;
  const int64_t elems = (int64_t)(b.o.size / (uint64_t)b.ntensors / sizeof(float));
  if (b.o.cols) {
    b.cols = b.o.cols / n * n;
  } else {
    b.cols = (int64_t)floor(sqrt((double)elems)) / n * n;
  }
  if (b.cols < n) b.cols = n;
  b.rows = elems / b.cols / n * n;
  if (b.rows < n) {
    if (b.rank == 0)
      fprintf(stderr, "checkpoint-bench: --size %llu is too small for %d tensors of %d x %d shards\n",
              (unsigned long long)b.o.size, b.ntensors, n, n);
    return 2;
  }
  b.rep_elems = (int64_t)(b.o.replicated / sizeof(float));
  b.nall = b.ntensors + (b.rep_elems > 0);
  for (int t = 0; t < b.ntensors; ++t) {
    snprintf(b.name_storage[t], sizeof b.name_storage[t], "layer%d.weight", t);
    b.names[t] = b.name_storage[t];
  }
  if (b.nall > b.ntensors) b.names[b.ntensors] = "replicated";
  b.global_bytes = (uint64_t)(b.ntensors * b.rows * b.cols + b.rep_elems) * sizeof(float);

  const int shape[1] = {n};
  const char *dims[1] = {"x"};
  CHECK(weft_mesh_create(b.comm, 1, shape, dims, NULL, &b.mesh));
  make_set(&b, &b.src, 0, 1);
  make_set(&b, &b.dst0, 0, 0);
  make_set(&b, &b.dst1, 1, 0);

  /* The temporary directory: made by rank 0, its name broadcast. */
  char root[PATH_BYTES];
  memset(root, 0, sizeof root);
  if (b.rank == 0) {
    fmt_path(root, "%s/weft-ckb-XXXXXX", b.o.dir);
    if (!mkdtemp(root)) die(3, "cannot make a temporary directory in %s: %s", b.o.dir, strerror(errno));
  }
  CHECK(weft_broadcast(root, sizeof root, WEFT_UINT8, 0, b.comm, NULL, NULL));
  fmt_path(g_root, "%s", root);
  struct statfs sfs;
  if (statfs(root, &sfs) != 0) die(3, "statfs %s: %s", root, strerror(errno));

  int version = 0;
  CHECK(weft_version(&version, NULL));
  if (b.rank == 0) {
    printf("# checkpoint-bench: weft %d.%d.%d, %d ranks, fsync %d, %d repeats\n", version / 10000,
           version / 100 % 100, version % 100, n, b.o.fsync, b.o.repeat);
    printf("# tensors: %d x float32 [%lld, %lld] S(0) on a 1-d mesh of %d ranks (even shards)", b.ntensors,
           (long long)b.rows, (long long)b.cols, n);
    if (b.nall > b.ntensors) printf(" + 'replicated' float32 [%lld] R", (long long)b.rep_elems);
    printf("\n# global bytes: %llu (%.1f MiB); per rank: %llu B of shards", (unsigned long long)b.global_bytes,
           (double)b.global_bytes / (1 << 20), (unsigned long long)(b.src.bytes[0] * (size_t)b.ntensors));
    if (b.nall > b.ntensors) printf(", rank 0 also the replicated tensor (%llu B)", (unsigned long long)b.src.bytes[b.ntensors]);
    printf("\n# dir: %s on %s (statfs type 0x%lx); loads and reads come from the page cache (not dropped)\n",
           root, fs_name((long)sfs.f_type), (unsigned long)sfs.f_type);
  }

  FILE *csv = NULL;
  if (b.rank == 0 && b.o.csv) {
    csv = fopen(b.o.csv, "a");
    if (!csv) die(3, "cannot open %s: %s", b.o.csv, strerror(errno));
    if (ftell(csv) == 0) fprintf(csv, "nranks,fsync,fs,global_bytes,rep,phase,seconds,gbps\n");
  }

  weft_checkpoint_config_t cfg = WEFT_CHECKPOINT_CONFIG_INIT;
  cfg.fsync = b.o.fsync;
  double secs[NPHASES][MAX_REPEATS];
  uint64_t rbytes[NPHASES], wbytes[NPHASES];
  long calls_w = 0, calls_r = 0;
  uint64_t wrong = 0;
  uint64_t stored_bytes = 0;
  int stored_files = 0;
  size_t rep_shards = 0;

  if (b.rank == 0)
    printf("#\n# %4s %9s %9s %8s %9s %9s %8s %10s   (GB/s = global bytes / slowest rank's time)\n", "rep", "save",
           "write", "save/wr", "load", "read", "load/rd", "load S(1)");
  for (int rep = 0; rep < b.o.repeat; ++rep) {
    char wdir[PATH_BYTES], bdir[PATH_BYTES];
    fmt_path(wdir, "%s/weft-%d", root, rep);
    fmt_path(bdir, "%s/plain-%d", root, rep);
    if (b.rank == 0) {
      make_dir(wdir);
      make_dir(bdir);
    }
    const int weft_first = rep % 2 == 0;
    for (int k = 0; k < 2; ++k) { /* the writes: weft and baseline, alternating which goes first */
      timed_t t = begin(&b);
      if ((k == 0) == weft_first) {
        CHECK(weft_checkpoint_save(b.comm, wdir, b.names, b.src.handle, (size_t)b.nall, &cfg));
        secs[SAVE][rep] = end(&b, t, &rbytes[SAVE], &wbytes[SAVE]);
      } else {
        calls_w = 0;
        baseline_write(&b, bdir, &calls_w);
        secs[WRITE][rep] = end(&b, t, &rbytes[WRITE], &wbytes[WRITE]);
      }
    }
    if (rep == 0 && b.rank == 0) { /* deduplication: the replicated tensor is stored once */
      stored_bytes = dir_bytes(wdir, &stored_files);
      weft_checkpoint_t ck;
      CHECK(weft_checkpoint_open(wdir, &ck));
      size_t count = 0;
      CHECK(weft_checkpoint_count(ck, &count));
      for (size_t i = 0; i < count; ++i) {
        const char *name;
        size_t nshards;
        CHECK(weft_checkpoint_tensor(ck, i, &name, NULL, NULL, NULL, &nshards));
        if (!strcmp(name, "replicated")) rep_shards = nshards;
      }
      CHECK(weft_checkpoint_close(ck));
      if (b.nall > b.ntensors && rep_shards != 1) {
        fprintf(stderr, "checkpoint-bench: the replicated tensor has %zu stored shards, expected 1\n", rep_shards);
        ++wrong;
      }
    }
    for (int k = 0; k < 2; ++k) { /* the reads into the same layout */
      poison(&b, &b.dst0);
      timed_t t = begin(&b);
      if ((k == 0) == weft_first) {
        CHECK(weft_checkpoint_load(wdir, b.names, b.dst0.handle, (size_t)b.nall, &cfg));
        secs[LOAD][rep] = end(&b, t, &rbytes[LOAD], &wbytes[LOAD]);
        wrong += check_set(&b, &b.dst0, "weft_checkpoint_load", rep);
      } else {
        calls_r = 0;
        baseline_read(&b, bdir, &calls_r);
        secs[READ][rep] = end(&b, t, &rbytes[READ], &wbytes[READ]);
        wrong += check_set(&b, &b.dst0, "baseline read", rep);
      }
    }
    poison(&b, &b.dst1);
    timed_t t = begin(&b);
    CHECK(weft_checkpoint_load(wdir, b.names, b.dst1.handle, (size_t)b.nall, &cfg));
    secs[LOAD_S1][rep] = end(&b, t, &rbytes[LOAD_S1], &wbytes[LOAD_S1]);
    wrong += check_set(&b, &b.dst1, "weft_checkpoint_load into S(1)", rep);

    barrier(&b);
    if (b.rank == 0) {
      remove_tree(wdir);
      remove_tree(bdir);
      const double g = (double)b.global_bytes / 1e9;
      printf("  %4d %9.2f %9.2f %8.2f %9.2f %9.2f %8.2f %10.2f\n", rep, g / secs[SAVE][rep], g / secs[WRITE][rep],
             secs[WRITE][rep] / secs[SAVE][rep], g / secs[LOAD][rep], g / secs[READ][rep],
             secs[READ][rep] / secs[LOAD][rep], g / secs[LOAD_S1][rep]);
      for (int p = 0; csv && p < NPHASES; ++p)
        fprintf(csv, "%d,%d,%s,%llu,%d,%s,%.6f,%.4f\n", n, b.o.fsync, fs_name((long)sfs.f_type),
                (unsigned long long)b.global_bytes, rep, kPhaseNames[p], secs[p][rep], g / secs[p][rep]);
      fflush(stdout);
    }
  }
  wrong = sum_over_ranks(&b, wrong);
  const uint64_t all_calls_w = sum_over_ranks(&b, (uint64_t)calls_w);
  const uint64_t all_calls_r = sum_over_ranks(&b, (uint64_t)calls_r);

  if (b.rank == 0) {
    const double g = (double)b.global_bytes / 1e9;
    double med[NPHASES], ratio_w[MAX_REPEATS], ratio_r[MAX_REPEATS];
    for (int p = 0; p < NPHASES; ++p) med[p] = median(secs[p], b.o.repeat);
    for (int r = 0; r < b.o.repeat; ++r) {
      ratio_w[r] = secs[WRITE][r] / secs[SAVE][r];
      ratio_r[r] = secs[READ][r] / secs[LOAD][r];
    }
    printf("  %4s %9.2f %9.2f %8.2f %9.2f %9.2f %8.2f %10.2f   (medians; ratios: median of the per-repeat ratios)\n",
           "med", g / med[SAVE], g / med[WRITE], median(ratio_w, b.o.repeat), g / med[LOAD], g / med[READ],
           median(ratio_r, b.o.repeat), g / med[LOAD_S1]);
    printf("  %4s %9.1f %9.1f %8s %9.1f %9.1f %8s %10.1f   (median times, ms)\n", "ms", 1e3 * med[SAVE],
           1e3 * med[WRITE], "", 1e3 * med[LOAD], 1e3 * med[READ], "", 1e3 * med[LOAD_S1]);
    printf("# bytes through read/write system calls, all ranks, last repeat, / global bytes:"
           " save w %.3f r %.3f; write w %.3f; load r %.3f; read r %.3f; load S(1) r %.3f\n",
           (double)wbytes[SAVE] / (double)b.global_bytes, (double)rbytes[SAVE] / (double)b.global_bytes,
           (double)wbytes[WRITE] / (double)b.global_bytes, (double)rbytes[LOAD] / (double)b.global_bytes,
           (double)rbytes[READ] / (double)b.global_bytes, (double)rbytes[LOAD_S1] / (double)b.global_bytes);
    printf("# baseline system calls, all ranks: %llu write() for %d shards, %llu read()\n",
           (unsigned long long)all_calls_w, b.ntensors * n + (b.nall > b.ntensors),
           (unsigned long long)all_calls_r);
    printf("# checkpoint: %d files, %llu B (%.4f x global bytes)", stored_files, (unsigned long long)stored_bytes,
           (double)stored_bytes / (double)b.global_bytes);
    if (b.nall > b.ntensors) {
      printf("; 'replicated' (held by %d ranks) stored as %zu shard%s\n", n, rep_shards, rep_shards == 1 ? "" : "s");
    } else {
      printf("; no replicated tensor (--replicated 0)\n");
    }
    printf("# check: every element of every load and baseline read, every repeat: %s (%llu wrong)\n",
           wrong ? "FAILED" : "OK", (unsigned long long)wrong);
    if (csv) fclose(csv);
    remove_tree(root);
    g_root[0] = '\0';
  }
  barrier(&b); /* weftrun stops the others when one rank exits non-zero: rank 0 reports first */
  free_set(&b, &b.src);
  free_set(&b, &b.dst0);
  free_set(&b, &b.dst1);
  CHECK(weft_mesh_destroy(b.mesh));
  CHECK(weft_comm_destroy(b.comm));
  return wrong ? 1 : 0;
}
