// Multi-process weft_redistribute on CUDA device memory, run under weftrun (2 or more ranks;
// 1 runs the single-mesh cases): all-gather, reduce-scatter (even and uneven), all-to-all,
// local slices and zero fills, a 2-d mesh, strided local views, and an exchange between two
// meshes, each called with a NULL stream, a user stream, a request, and a request on a user
// stream. With WEFT_DEVICE=0 every rank shares GPU 0, NCCL refuses the communicators and the
// steps are staged; with a GPU per rank (WEFT_EMU_DEVICES=8 in the emulated build) they run on
// NCCL (the stand-in).
//
// Expected values come from this file alone: the global tensor is a function of the element's
// linear index, PARTIAL(sum) sources split it into terms by mesh coordinate, and every rank's
// expected local piece is sliced by the split rule written here from weft/mesh.h's prose
// (chunks of ceil(n / k), trailing chunks smaller or empty, nested left to right). Device memory
// is read back with cudaMemcpyAsync on a stream of the test's own that does not synchronise
// with the legacy default stream, so a NULL-stream call or a request that completed before its
// data had landed reads stale bytes and fails. Every byte of dst's buffer that is no element
// must keep its fill pattern, and src must be unchanged.
//
// Exits 77 (ctest: skipped) when no GPU is visible. WEFT_TEST_INJECT=1 corrupts one element of
// every non-empty result before it is checked (injection.h); the program then passes only when
// every corruption was caught.
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <algorithm>
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

// ------------------------------------------------------------------ cases

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

struct Case {
  std::string name;
  MeshDef* src_mesh;
  MeshDef* dst_mesh;
  Shape global;
  Layout src, dst;
  weft_dtype_t dt = WEFT_FLOAT32;
  View src_view = View::contiguous, dst_view = View::contiguous;
  weft_redistribute_kind_t expect_step;  // a step the plan must contain (what the case is for)
};

void failure(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what.c_str(), detail.c_str());
  ++g_failures;
}

// What this rank's destination element at global index g must hold.
int64_t expected(const Case& c, const std::vector<int>& dst_coords, int64_t g, uint64_t seed) {
  for (size_t m = 0; m < c.dst.size(); ++m) {
    // REPLICATE -> PARTIAL(sum): the value on coordinate 0, zeros elsewhere.
    if (c.dst[m].kind == 'P' && dst_coords[m] != 0) return 0;
  }
  return value(g, seed);
}

// What this rank's source element at global index g holds.
int64_t source(const Case& c, const std::vector<int>& src_coords, int64_t g, uint64_t seed) {
  for (size_t m = 0; m < c.src.size(); ++m) {
    if (c.src[m].kind == 'P') return term(g, seed, src_coords[m], c.src_mesh->shape[m]);
  }
  return value(g, seed);
}

weft_sharded_t make_sharded(const MeshDef& mesh, const Case& c, const Layout& layout, const Piece* piece) {
  std::vector<weft_placement_t> pl;
  for (const Placement& p : layout) {
    weft_placement_t w = WEFT_PLACEMENT_REPLICATE_INIT;
    if (p.kind == 'S') {
      w.kind = WEFT_SHARD;
      w.dim = p.dim;
    } else if (p.kind == 'P') {
      w.kind = WEFT_PARTIAL;
      w.op = WEFT_SUM;
    }
    pl.push_back(w);
  }
  weft_tensor_t t{};
  if (piece) t = piece->tensor(c.dt);
  weft_sharded_t h = nullptr;
  MPT_OK(weft_sharded_create(mesh.handle, static_cast<int>(c.global.size()), c.global.data(), c.dt, pl.data(),
                             piece ? &t : nullptr, nullptr, &h));
  return h;
}

void run(const Case& c, Mode mode, cudaStream_t stream, uint64_t seed) {
  const std::string what = c.name + " " + layout_name(c.src) + " -> " + layout_name(c.dst) + " (" +
                           dtype_text(c.dt) + ", src " + view_name(c.src_view) + ", dst " +
                           view_name(c.dst_view) + ", " + mode_name(mode) + ")";
  const size_t e = elem_size(c.dt);
  const int sp = c.src_mesh->position(), dp = c.dst_mesh->position();
  const std::vector<int> sc = sp >= 0 ? c.src_mesh->coords(sp) : std::vector<int>{};
  const std::vector<int> dc = dp >= 0 ? c.dst_mesh->coords(dp) : std::vector<int>{};
  std::unique_ptr<Piece> in, out;
  Box sbox, dbox;
  if (sp >= 0) {
    sbox = box_of(*c.src_mesh, c.src, c.global, sc);
    in = std::make_unique<Piece>(sbox.shape, e, c.src_view);
    in->for_each([&](const Shape& idx, int64_t) {
      Shape gi(idx.size());
      for (size_t d = 0; d < idx.size(); ++d) gi[d] = sbox.offset[d] + idx[d];
      store(&in->image[in->offset_of(idx)], e, encode(c.dt, source(c, sc, linear(c.global, gi), seed)));
    });
    in->upload();
  }
  if (dp >= 0) {
    dbox = box_of(*c.dst_mesh, c.dst, c.global, dc);
    out = std::make_unique<Piece>(dbox.shape, e, c.dst_view);
    out->for_each([&](const Shape& idx, int64_t) { std::memset(&out->image[out->offset_of(idx)], kGarbage, e); });
    out->upload();
  }
  weft_sharded_t src = make_sharded(*c.src_mesh, c, c.src, in.get());
  weft_sharded_t dst = make_sharded(*c.dst_mesh, c, c.dst, out.get());

  // The plan must contain the step the case is about (and weft_redistribute_plan works on it).
  weft_redistribute_step_t steps[16];
  size_t nsteps = 0;
  MPT_OK(weft_redistribute_plan(src, dst, steps, 16, &nsteps));
  bool found = false;
  for (size_t i = 0; i < nsteps && i < 16; ++i) found = found || steps[i].kind == c.expect_step;
  if (!found) failure(what, "the plan has no step of kind " + std::to_string(c.expect_step));

  const bool user = mode == Mode::user_stream || mode == Mode::request_user_stream;
  const bool req = mode == Mode::request || mode == Mode::request_user_stream;
  weft_request_t request = nullptr;
  weft_status_t st = weft_redistribute(src, dst, user ? stream : nullptr, req ? &request : nullptr);
  if (st == WEFT_OK && request) st = weft_wait(request);
  weft_request_free(request);
  // A user stream without a request: the work is stream-ordered; the other modes are complete.
  if (st == WEFT_OK && mode == Mode::user_stream && cudaStreamSynchronize(stream) != cudaSuccess) {
    st = WEFT_ERR_INTERNAL;
  }
  if (st != WEFT_OK) {
    failure(what, std::string("weft_redistribute failed: ") + weft_status_string(st) + ": " + weft_last_error());
    std::exit(1);  // the ranks no longer agree on what comes next
  }

  if (out) {
    const std::vector<unsigned char> got = out->download();
    // The elements, packed row-major, then corrupted when injecting.
    std::vector<unsigned char> elems(static_cast<size_t>(out->numel()) * e);
    std::vector<uint64_t> want(static_cast<size_t>(out->numel()));
    out->for_each([&](const Shape& idx, int64_t k) {
      std::memcpy(&elems[static_cast<size_t>(k) * e], &got[out->offset_of(idx)], e);
      Shape gi(idx.size());
      for (size_t d = 0; d < idx.size(); ++d) gi[d] = dbox.offset[d] + idx[d];
      want[static_cast<size_t>(k)] = encode(c.dt, expected(c, dc, linear(c.global, gi), seed));
    });
    const bool injected = weft::gputest::inject(elems.data(), c.dt, want.size());
    size_t wrong = 0, first = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      if (load(&elems[k * e], e) == want[k]) continue;
      if (wrong++ == 0) first = k;
    }
    g_tally.record(c.name, injected, wrong != 0);
    if (injected != (wrong != 0)) {
      failure(what, wrong ? std::to_string(wrong) + " of " + std::to_string(want.size()) +
                                " elements wrong; first: element " + std::to_string(first) + " expected bits " +
                                std::to_string(want[first]) + ", got " + std::to_string(load(&elems[first * e], e))
                          : "the corrupted result (WEFT_TEST_INJECT) passed the check");
    }
    // Bytes between and around the elements: untouched.
    std::vector<bool> is_elem(out->bytes, false);
    out->for_each([&](const Shape& idx, int64_t) {
      for (size_t b = 0; b < e; ++b) is_elem[out->offset_of(idx) + b] = true;
    });
    for (size_t b = 0; b < out->bytes; ++b) {
      if (!is_elem[b] && got[b] != kGap) {
        failure(what, "dst's byte " + std::to_string(b) + " is no element but was written");
        break;
      }
    }
  }
  if (in && in->download() != in->image) failure(what, "src's memory changed");
  weft_sharded_destroy(src);
  weft_sharded_destroy(dst);
}

// Memory weft_redistribute must refuse, before any communication (so every rank may get it):
// host and device memory mixed, memory declared CUDA that is host memory, a stream with host
// memory. Each error names the offending side. (A rank whose device src piece is empty meets
// the mix through the declaration: device_type WEFT_DEVICE_CUDA beside host dst memory.)
void refusals(MeshDef& world) {
  const Shape global{2 * static_cast<int64_t>(g_size) + 1, 2};
  Case c{"refusal", &world, &world, global, {S(0)}, {R()}, WEFT_FLOAT32, View::contiguous, View::contiguous,
         WEFT_STEP_ALLGATHER};
  const Box sbox = box_of(world, c.src, global, world.coords(world.position()));
  const Piece dev_src(sbox.shape, 4, View::contiguous);
  std::vector<float> host_src(static_cast<size_t>(std::max<int64_t>(sbox.numel(), 1))),
      host_dst(static_cast<size_t>(global[0] * global[1]));
  auto host_view = [&](std::vector<float>& mem, const Shape& shape, weft_device_type_t type) {
    return weft_tensor_t{mem.data(), type, 0, 2, WEFT_FLOAT32, shape.data(), nullptr, 0};
  };
  auto sharded = [&](const Layout& layout, const weft_tensor_t& t) {
    weft_placement_t p = WEFT_PLACEMENT_REPLICATE_INIT;
    if (layout[0].kind == 'S') {
      p.kind = WEFT_SHARD;
      p.dim = layout[0].dim;
    }
    weft_sharded_t h = nullptr;
    MPT_OK(weft_sharded_create(world.handle, 2, global.data(), WEFT_FLOAT32, &p, &t, nullptr, &h));
    return h;
  };
  struct Refusal {
    const char* what;
    weft_tensor_t src, dst;
    bool stream;
    weft_status_t status;
    const char* name1;  // must appear in weft_last_error()
    const char* name2;
  };
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const Refusal table[] = {
      {"device src, host dst", dev_src.tensor(WEFT_FLOAT32), host_view(host_dst, global, WEFT_DEVICE_CPU), false,
       WEFT_ERR_UNSUPPORTED, "src", "dst"},
      {"dst declared CUDA but host memory", host_view(host_src, sbox.shape, WEFT_DEVICE_CPU),
       host_view(host_dst, global, WEFT_DEVICE_CUDA), false, WEFT_ERR_INVALID_ARGUMENT, "dst", "declared"},
      {"host memory with a stream", host_view(host_src, sbox.shape, WEFT_DEVICE_CPU),
       host_view(host_dst, global, WEFT_DEVICE_CPU), true, WEFT_ERR_UNSUPPORTED, "stream", "host memory"},
  };
  for (const Refusal& r : table) {
    weft_sharded_t src = sharded(c.src, r.src), dst = sharded(c.dst, r.dst);
    const weft_status_t st = weft_redistribute(src, dst, r.stream ? s : nullptr, nullptr);
    const std::string msg = st == WEFT_OK ? "" : weft_last_error();
    if (st != r.status || msg.find(r.name1) == std::string::npos || msg.find(r.name2) == std::string::npos) {
      failure(std::string("refusal: ") + r.what,
              std::string("got ") + weft_status_string(st) + " (" + msg + "), want " + weft_status_string(r.status) +
                  " naming " + r.name1 + " and " + r.name2);
    }
    weft_sharded_destroy(src);
    weft_sharded_destroy(dst);
  }
  cudaStreamDestroy(s);
}

void create_mesh(weft_comm_t comm, MeshDef& m) {
  weft_mesh_config_t cfg = WEFT_MESH_CONFIG_INIT;
  cfg.ranks = m.ranks.data();
  cfg.nranks = m.ranks.size();
  MPT_OK(weft_mesh_create(comm, static_cast<int>(m.shape.size()), m.shape.data(), nullptr, &cfg, &m.handle));
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
  // The communicators' GPU, which the local pieces must be on.
  weft::gputest::use_rank_device(g_rank, devices);
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&g_readback, cudaStreamNonBlocking);

  const int n = g_size;
  std::vector<int> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
  int a = n;  // the 2-d mesh: smallest prime factor x the rest (2 ranks: 2 x 1, 4 ranks: 2 x 2)
  for (int f = 2; f < n; ++f) {
    if (n % f == 0) {
      a = f;
      break;
    }
  }
  MeshDef world{{n}, all};
  MeshDef grid{{a, n / a}, all};
  // Between meshes: the world -> its last n - 1 ranks in reverse order (2 -> 1, 3 -> 2).
  MeshDef fewer{{std::max(1, n - 1)}, {}};
  for (int r = n - 1; r >= std::min(1, n - 1); --r) fewer.ranks.push_back(r);
  create_mesh(w.comm, world);
  create_mesh(w.comm, grid);
  create_mesh(w.comm, fewer);

  const int64_t n2 = 2 * static_cast<int64_t>(n);
  const View C = View::contiguous, Pd = View::padded, T = View::transposed;
  std::vector<Case> cases = {
      {"allgather", &world, &world, {n2 + 1, 3}, {S(0)}, {R()}, WEFT_FLOAT32, C, C, WEFT_STEP_ALLGATHER},
      {"allgather strided", &world, &world, {n2 + 1, 3}, {S(0)}, {R()}, WEFT_BFLOAT16, T, Pd, WEFT_STEP_ALLGATHER},
      {"allreduce", &world, &world, {5, 3}, {Psum()}, {R()}, WEFT_FLOAT32, C, C, WEFT_STEP_ALLREDUCE},
      {"reduce_scatter even", &world, &world, {n2, 3}, {Psum()}, {S(0)}, WEFT_FLOAT32, C, C,
       WEFT_STEP_REDUCE_SCATTER},
      {"reduce_scatter uneven", &world, &world, {n2 + 1, 3}, {Psum()}, {S(0)}, WEFT_INT32, C, C,
       WEFT_STEP_REDUCE_SCATTER},
      {"reduce_scatter strided", &world, &world, {n2 + 1, 4}, {Psum()}, {S(0)}, WEFT_FLOAT64, Pd, T,
       WEFT_STEP_REDUCE_SCATTER},
      {"alltoall", &world, &world, {n + 2, n2 + 1}, {S(0)}, {S(1)}, WEFT_FLOAT32, C, C, WEFT_STEP_ALLTOALL},
      {"alltoall strided", &world, &world, {n + 2, n2 + 1}, {S(1)}, {S(0)}, WEFT_BFLOAT16, Pd, T,
       WEFT_STEP_ALLTOALL},
      {"slice", &world, &world, {n2 + 1, 3}, {R()}, {S(0)}, WEFT_FLOAT32, T, C, WEFT_STEP_LOCAL},
      {"slice and zero fill", &world, &world, {n2 + 1, 3}, {R()}, {Psum()}, WEFT_FLOAT32, C, Pd, WEFT_STEP_LOCAL},
      {"2-d mesh", &grid, &grid, {7, 5}, {S(0), S(1)}, {R(), R()}, WEFT_FLOAT32, C, C, WEFT_STEP_ALLGATHER},
      {"2-d mesh partial", &grid, &grid, {7, 5}, {Psum(), S(0)}, {S(1), R()}, WEFT_FLOAT32, Pd, C,
       WEFT_STEP_REDUCE_SCATTER},
  };
  if (n >= 2) {
    cases.push_back({"mesh to mesh", &world, &fewer, {5, 4}, {S(0)}, {S(1)}, WEFT_FLOAT32, C, C,
                     WEFT_STEP_EXCHANGE});
    cases.push_back({"mesh to mesh strided", &world, &fewer, {n2 + 1, 3}, {S(1)}, {R()}, WEFT_FLOAT64, Pd, T,
                     WEFT_STEP_EXCHANGE});
    cases.push_back({"mesh to mesh partial", &world, &fewer, {5, 3}, {Psum()}, {S(0)}, WEFT_FLOAT32, C, C,
                     WEFT_STEP_EXCHANGE});
  }
  refusals(world);
  uint64_t seed = 1;
  for (const Case& c : cases) {
    for (Mode m : {Mode::null_stream, Mode::user_stream, Mode::request, Mode::request_user_stream}) {
      run(c, m, stream, seed++);
    }
  }

  // Afterwards the mesh's communicators still work (nothing left queued or broken).
  weft_status_t st = weft_barrier(w.comm, nullptr, nullptr);
  if (st != WEFT_OK) failure("barrier", weft_status_string(st));
  for (MeshDef* m : {&world, &grid, &fewer}) weft_mesh_destroy(m->handle);
  weft_comm_destroy(w.comm);
  cudaStreamDestroy(stream);
  cudaStreamDestroy(g_readback);
  if (mpt::inject_enabled()) return g_tally.report(false) && g_failures == 0 ? 0 : 1;
  if (g_failures) {
    std::fprintf(stderr, "rank %d: %d failure(s)\n", g_rank, g_failures);
    return 1;
  }
  std::printf("rank %d: %zu redistributions of device memory match the reference\n", g_rank, cases.size() * 4);
  return 0;
}
