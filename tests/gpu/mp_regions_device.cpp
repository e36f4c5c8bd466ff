// Multi-process weft_region_apply and weft_ring_shift (weft/training.h) on CUDA device memory, run
// under weftrun: a representative subset of what tests/multiproc/test_regions*.cpp runs on host
// memory - every kind of step a region makes (identity copy and in place, all-reduce in place and
// not, keep-chunk slice, all-gather even and uneven, reduce-scatter even and uneven), strided
// views, int32/f32/f64/bf16, a 2-d mesh over each of its dims - and ring shifts (+1, -1, 2, 0,
// senders of different sizes, a full ring queued on one user stream), each called with a NULL
// stream, a user stream, a request, and a request on a user stream. With WEFT_DEVICE=0 every rank
// shares GPU 0 and the steps are staged; with a GPU per rank (WEFT_EMU_DEVICES=8 in the emulated
// build) they run on NCCL (the stand-in).
//
// Expected values come from device_sharding_ref.h (the split rule, the value formula and the
// PARTIAL(sum) terms written from the headers' prose); sums are added up here in a loop over the
// group. Device memory is read back on a non-blocking stream of the test's own, so a result that
// had not landed when the call (or its request) said it had reads stale bytes and fails.
//
// Exits 77 (ctest: skipped) when no GPU is visible. WEFT_TEST_INJECT=1 corrupts one element of
// every non-empty result before it is checked; the program then passes only when every
// corruption was caught.
#include <cuda_runtime_api.h>
#include <weft/training.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rank_device.h"
#include "device_sharding_ref.h"
#include "injection.h"
#include "mp_common.h"

using namespace device_sharding;

namespace {

enum class Mode { null_stream, user_stream, request, request_user_stream };
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::null_stream: return "NULL stream";
    case Mode::user_stream: return "user stream";
    case Mode::request: return "request";
    case Mode::request_user_stream: return "request on a user stream";
  }
  return "?";
}
constexpr Mode kModes[] = {Mode::null_stream, Mode::user_stream, Mode::request, Mode::request_user_stream};

void failure(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what.c_str(), detail.c_str());
  ++g_failures;
}

struct Mesh {
  MeshDef def;
  std::vector<std::string> dims;
};

// The test's own table: which side is whole, which this rank's chunk, whether the input holds
// terms and the output their sum.
struct Direction {
  bool in_chunk, out_chunk, sum;
};
Direction direction_of(weft_region_t r, int bwd) {
  switch (r) {
    case WEFT_REGION_COPY: return {false, false, bwd == 1};
    case WEFT_REGION_REDUCE: return {false, false, bwd == 0};
    case WEFT_REGION_SCATTER: return bwd ? Direction{true, false, false} : Direction{false, true, false};
    case WEFT_REGION_GATHER: return bwd ? Direction{false, true, false} : Direction{true, false, false};
    case WEFT_REGION_SEQ_GATHER: return bwd ? Direction{false, true, true} : Direction{true, false, false};
    case WEFT_REGION_SEQ_REDUCE_SCATTER: return bwd ? Direction{true, false, false} : Direction{false, true, true};
  }
  return {};
}

struct Case {
  std::string name;
  Mesh* mesh;
  int dim;
  weft_region_t region;
  int backward;
  weft_dtype_t dt;
  Shape whole;
  int split_dim;
  View in_view, out_view;
  bool in_place;
};

// Waits as the mode says; a user stream without a request is synchronised here (stream-ordered).
weft_status_t finish(weft_status_t st, Mode mode, cudaStream_t stream, weft_request_t request) {
  if (st == WEFT_OK && request) st = weft_wait(request);
  weft_request_free(request);
  if (st == WEFT_OK && mode == Mode::user_stream && cudaStreamSynchronize(stream) != cudaSuccess) st = WEFT_ERR_INTERNAL;
  return st;
}

// The elements of `piece` (downloaded) against want(k) for the k-th element in row-major order,
// with injection; and the bytes that are no element untouched.
void check_piece(const std::string& what, const char* name, const Piece& piece, weft_dtype_t dt,
                 const std::vector<uint64_t>& want, bool inject) {
  const size_t e = piece.elem;
  const std::vector<unsigned char> got = piece.download();
  std::vector<unsigned char> elems(want.size() * e);
  std::vector<bool> is_elem(piece.bytes, false);
  piece.for_each([&](const Shape& idx, int64_t k) {
    std::memcpy(&elems[static_cast<size_t>(k) * e], &got[piece.offset_of(idx)], e);
    for (size_t b = 0; b < e; ++b) is_elem[piece.offset_of(idx) + b] = true;
  });
  const bool injected = inject && weft::gputest::inject(elems.data(), dt, want.size());
  size_t wrong = 0, first = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    if (load(&elems[k * e], e) == want[k]) continue;
    if (wrong++ == 0) first = k;
  }
  if (inject) g_tally.record(what.substr(0, what.find(' ')), injected, wrong != 0);
  if (injected != (wrong != 0)) {
    failure(what, wrong ? std::string(name) + ": " + std::to_string(wrong) + " of " + std::to_string(want.size()) +
                              " elements wrong; first: element " + std::to_string(first) + " expected bits " +
                              std::to_string(want[first]) + ", got " + std::to_string(load(&elems[first * e], e))
                        : std::string(name) + ": the corrupted result (WEFT_TEST_INJECT) passed the check");
  }
  for (size_t b = 0; b < piece.bytes; ++b) {
    if (!is_elem[b] && got[b] != kGap) {
      failure(what, std::string(name) + "'s byte " + std::to_string(b) + " is no element but was written");
      break;
    }
  }
}

void run_region(const Case& c, Mode mode, cudaStream_t stream, uint64_t seed) {
  const std::string what = c.name + " (" + dtype_text(c.dt) + ", in " + view_name(c.in_view) +
                           (c.in_place ? ", in == out" : std::string(", out ") + view_name(c.out_view)) + ", " +
                           mode_name(mode) + ")";
  const MeshDef& m = c.mesh->def;
  const int pos = m.position();
  std::vector<int> co = m.coords(pos);
  const int k = m.shape[static_cast<size_t>(c.dim)], me = co[static_cast<size_t>(c.dim)];
  co[static_cast<size_t>(c.dim)] = 0;
  int group = 0;  // the position of the group's coordinate-0 member: each group its own tensor
  for (size_t d = 0; d < co.size(); ++d) group = group * m.shape[d] + co[d];
  const uint64_t gseed = seed * 16 + static_cast<uint64_t>(group);
  const Direction dir = direction_of(c.region, c.backward);
  const size_t e = elem_size(c.dt);
  Shape off(c.whole.size(), 0), chunk_shape = c.whole;
  const auto sd = static_cast<size_t>(c.split_dim);
  chunk(c.whole[sd], k, me, &off[sd], &chunk_shape[sd]);
  auto global = [&](const Shape& idx, bool is_chunk) {
    Shape g(idx.size());
    for (size_t d = 0; d < idx.size(); ++d) g[d] = idx[d] + (is_chunk ? off[d] : 0);
    return linear(c.whole, g);
  };
  Piece in(dir.in_chunk ? chunk_shape : c.whole, e, c.in_view);
  in.for_each([&](const Shape& idx, int64_t) {
    const int64_t g = global(idx, dir.in_chunk);
    store(&in.image[in.offset_of(idx)], e, encode(c.dt, dir.sum ? term(g, gseed, me, k) : value(g, gseed)));
  });
  in.upload();
  std::unique_ptr<Piece> own;
  if (!c.in_place) {
    own = std::make_unique<Piece>(dir.out_chunk ? chunk_shape : c.whole, e, c.out_view);
    own->for_each([&](const Shape& idx, int64_t) { std::memset(&own->image[own->offset_of(idx)], kGarbage, e); });
    own->upload();
  }
  const Piece& out = c.in_place ? in : *own;
  const weft_tensor_t ti = in.tensor(c.dt), to = out.tensor(c.dt);
  const bool user = mode == Mode::user_stream || mode == Mode::request_user_stream;
  const bool req = mode == Mode::request || mode == Mode::request_user_stream;
  weft_request_t request = nullptr;
  weft_status_t st = weft_region_apply(c.mesh->def.handle, c.mesh->dims[static_cast<size_t>(c.dim)].c_str(), c.region,
                                       c.backward, c.split_dim, &ti, &to, user ? stream : nullptr,
                                       req ? &request : nullptr);
  st = finish(st, mode, stream, request);
  if (st != WEFT_OK) {
    failure(what, std::string("weft_region_apply failed: ") + weft_status_string(st) + ": " + weft_last_error());
    std::exit(1);  // the ranks no longer agree on what comes next
  }
  std::vector<uint64_t> want(static_cast<size_t>(out.numel()));
  out.for_each([&](const Shape& idx, int64_t n) {
    const int64_t g = global(idx, dir.out_chunk);
    int64_t v = value(g, gseed);
    if (dir.sum) {
      v = 0;
      for (int j = 0; j < k; ++j) v += term(g, gseed, j, k);
    }
    want[static_cast<size_t>(n)] = encode(c.dt, v);
  });
  check_piece(what, "out", out, c.dt, want, true);
  if (!c.in_place && in.download() != in.image) failure(what, "in's memory changed");
}

// Rank coordinate c sends (c + 1) rows of 3 f32 values, a function of (seed, group, c, index).
void run_ring(Mesh& mesh, int dim, int shift, Mode mode, cudaStream_t stream, uint64_t seed) {
  const MeshDef& m = mesh.def;
  const std::string what = "ring shift " + std::to_string(shift) + " along " + mesh.dims[static_cast<size_t>(dim)] +
                           " (" + mode_name(mode) + ")";
  std::vector<int> co = m.coords(m.position());
  const int k = m.shape[static_cast<size_t>(dim)], me = co[static_cast<size_t>(dim)];
  const int from = static_cast<int>(((static_cast<int64_t>(me) - shift) % k + k) % k);
  co[static_cast<size_t>(dim)] = 0;
  int group = 0;  // each group its own values: a block from another group fails
  for (size_t d = 0; d < co.size(); ++d) group = group * m.shape[d] + co[d];
  const uint64_t gseed = seed * 16 + static_cast<uint64_t>(group);
  auto val = [&](int origin, int64_t i) { return encode(WEFT_FLOAT32, value(i * 8 + origin, gseed)); };
  Piece send({me + 1, 3}, 4, View::contiguous), recv({from + 1, 3}, 4, View::contiguous);
  send.for_each([&](const Shape& idx, int64_t n) { store(&send.image[send.offset_of(idx)], 4, val(me, n)); });
  send.upload();
  recv.upload();
  const weft_tensor_t ts = send.tensor(WEFT_FLOAT32), tr = recv.tensor(WEFT_FLOAT32);
  const bool user = mode == Mode::user_stream || mode == Mode::request_user_stream;
  const bool req = mode == Mode::request || mode == Mode::request_user_stream;
  weft_request_t request = nullptr;
  weft_status_t st = weft_ring_shift(m.handle, mesh.dims[static_cast<size_t>(dim)].c_str(), shift, &ts, &tr,
                                     user ? stream : nullptr, req ? &request : nullptr);
  st = finish(st, mode, stream, request);
  if (st != WEFT_OK) {
    failure(what, std::string("weft_ring_shift failed: ") + weft_status_string(st) + ": " + weft_last_error());
    std::exit(1);
  }
  std::vector<uint64_t> want(static_cast<size_t>(recv.numel()));
  for (size_t n = 0; n < want.size(); ++n) want[n] = val(from, static_cast<int64_t>(n));
  check_piece(what, "recv", recv, WEFT_FLOAT32, want, true);
  if (send.download() != send.image) failure(what, "send's memory changed");
}

// k steps of +1 queued on one user stream without waiting in between (stream order carries each
// step's block to the next): every block comes home.
void full_ring(Mesh& mesh, int dim, cudaStream_t stream, uint64_t seed) {
  const MeshDef& m = mesh.def;
  const int k = m.shape[static_cast<size_t>(dim)], me = m.coords(m.position())[static_cast<size_t>(dim)];
  const std::string what = "full ring along " + mesh.dims[static_cast<size_t>(dim)] + " (user stream)";
  std::vector<std::unique_ptr<Piece>> blocks;  // blocks[t]: what this rank holds after t steps
  for (int t = 0; t <= k; ++t) {
    const int origin = ((me - t) % k + k) % k;
    blocks.push_back(std::make_unique<Piece>(Shape{origin + 1, 3}, 4, View::contiguous));
  }
  auto val = [&](int origin, int64_t i) { return encode(WEFT_FLOAT32, value(i * 8 + origin, seed)); };
  blocks[0]->for_each([&](const Shape& idx, int64_t n) { store(&blocks[0]->image[blocks[0]->offset_of(idx)], 4, val(me, n)); });
  for (auto& b : blocks) b->upload();
  for (int t = 1; t <= k; ++t) {
    const weft_tensor_t ts = blocks[static_cast<size_t>(t - 1)]->tensor(WEFT_FLOAT32);
    const weft_tensor_t tr = blocks[static_cast<size_t>(t)]->tensor(WEFT_FLOAT32);
    const weft_status_t st = weft_ring_shift(m.handle, mesh.dims[static_cast<size_t>(dim)].c_str(), 1, &ts, &tr, stream, nullptr);
    if (st != WEFT_OK) {
      failure(what, std::string("weft_ring_shift failed: ") + weft_status_string(st) + ": " + weft_last_error());
      std::exit(1);
    }
  }
  cudaStreamSynchronize(stream);
  std::vector<uint64_t> want(static_cast<size_t>(blocks[static_cast<size_t>(k)]->numel()));
  for (size_t n = 0; n < want.size(); ++n) want[n] = val(me, static_cast<int64_t>(n));
  check_piece(what, "the block home again", *blocks[static_cast<size_t>(k)], WEFT_FLOAT32, want, true);
}

void create_mesh(weft_comm_t comm, Mesh& m) {
  std::vector<const char*> names;
  for (const std::string& d : m.dims) names.push_back(d.c_str());
  MPT_OK(weft_mesh_create(comm, static_cast<int>(m.def.shape.size()), m.def.shape.data(), names.data(), nullptr,
                          &m.def.handle));
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("SKIP: no GPU (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "no device visible");
    return 77;
  }
  mpt::World w = mpt::init_world();
  g_rank = w.rank;
  g_size = w.size;
  mpt::set_log_rank(g_rank, g_size);
  weft::gputest::use_rank_device(g_rank, devices);
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&g_readback, cudaStreamNonBlocking);

  const int n = g_size;
  std::vector<int> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
  int a = n;  // 2-d: smallest prime factor x the rest (4 ranks: 2 x 2)
  for (int f = 2; f < n; ++f) {
    if (n % f == 0) {
      a = f;
      break;
    }
  }
  Mesh world{{{n}, all}, {"tp"}};
  Mesh grid{{{a, n / a}, all}, {"dp", "tp"}};
  create_mesh(w.comm, world);
  create_mesh(w.comm, grid);

  const int64_t n2 = 2 * static_cast<int64_t>(n);
  const View C = View::contiguous, Pd = View::padded, T = View::transposed;
  const std::vector<Case> cases = {
      {"copy", &world, 0, WEFT_REGION_COPY, 0, WEFT_FLOAT32, {7, 3}, 0, T, Pd, false},
      {"copy_in_place", &world, 0, WEFT_REGION_COPY, 0, WEFT_FLOAT32, {7, 3}, 0, Pd, Pd, true},
      {"allreduce", &world, 0, WEFT_REGION_COPY, 1, WEFT_FLOAT32, {5, 3}, 0, C, T, false},
      {"allreduce_in_place", &world, 0, WEFT_REGION_REDUCE, 0, WEFT_BFLOAT16, {5, 4}, 0, Pd, Pd, true},
      {"keep_chunk", &world, 0, WEFT_REGION_SCATTER, 0, WEFT_FLOAT32, {n2 + 1, 3}, 0, T, C, false},
      {"allgather_uneven", &world, 0, WEFT_REGION_GATHER, 0, WEFT_FLOAT32, {n2 + 1, 3}, 0, C, C, false},
      {"allgather_strided", &world, 0, WEFT_REGION_SEQ_REDUCE_SCATTER, 1, WEFT_BFLOAT16, {3, n2 + 1}, 1, Pd, T, false},
      {"reduce_scatter_uneven", &world, 0, WEFT_REGION_SEQ_GATHER, 1, WEFT_INT32, {n2 + 1, 3}, 0, C, C, false},
      {"reduce_scatter_even", &world, 0, WEFT_REGION_SEQ_REDUCE_SCATTER, 0, WEFT_FLOAT64, {n2, 3}, 0, Pd, T, false},
      {"keep_chunk_last_dim", &world, 0, WEFT_REGION_GATHER, 1, WEFT_FLOAT32, {2, 3, 7}, 2, C, Pd, false},
      {"grid_tp_allgather", &grid, 1, WEFT_REGION_SEQ_GATHER, 0, WEFT_FLOAT32, {7, 5}, 0, C, T, false},
      {"grid_dp_allreduce", &grid, 0, WEFT_REGION_REDUCE, 0, WEFT_FLOAT32, {7, 5}, 0, T, C, false},
      {"grid_dp_reduce_scatter", &grid, 0, WEFT_REGION_SEQ_REDUCE_SCATTER, 0, WEFT_INT32, {7, 5}, 1, C, C, false},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    for (Mode m : kModes) run_region(c, m, stream, seed++);
  }
  for (int shift : {1, -1, 2, 0}) {
    for (Mode m : kModes) run_ring(world, 0, shift, m, stream, seed++);
  }
  for (Mode m : kModes) run_ring(grid, 1, 1, m, stream, seed++);
  full_ring(world, 0, stream, seed++);
  full_ring(grid, 0, stream, seed++);

  // Afterwards the mesh's communicators still work (nothing left queued or broken).
  weft_status_t st = weft_barrier(w.comm, nullptr, nullptr);
  if (st != WEFT_OK) failure("barrier", weft_status_string(st));
  weft_mesh_destroy(world.def.handle);
  weft_mesh_destroy(grid.def.handle);
  weft_comm_destroy(w.comm);
  cudaStreamDestroy(stream);
  cudaStreamDestroy(g_readback);
  if (mpt::inject_enabled()) return g_tally.report(false) && g_failures == 0 ? 0 : 1;
  if (g_failures) {
    std::fprintf(stderr, "rank %d: %d failure(s)\n", g_rank, g_failures);
    return 1;
  }
  std::printf("rank %d: %zu region operations and %d ring shifts of device memory match the reference\n", g_rank,
              cases.size() * 4, 4 * 4 + 4 + 2);
  return 0;
}
