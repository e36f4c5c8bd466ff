// Distributed checkpoints of CUDA device memory (weft/mesh.h, "distributed checkpoints"), run
// under weftrun (2 or more ranks): every rank saves device tensors (contiguous, padded and
// transposed views, PARTIAL(sum) on a 1-d and a 2-d mesh, a padded piece of over 8 MiB that is
// staged in several chunks), then loads them on another mesh of n - 1 ranks with another layout
// into device pieces (strided too, and PARTIAL(sum), whose
// non-zero coordinates must get zeros) and into host pieces on all n ranks.
//
// Expected values come from this file alone, as in mp_redistribute_device.cpp (whose reference
// is copied here): the global tensor is a function of the element's linear index, PARTIAL(sum)
// sources split it into terms by mesh coordinate, and every local piece is sliced by the split
// rule written here from weft/mesh.h's prose (chunks of ceil(n / k), trailing chunks smaller or
// empty). Device memory is read back on a non-blocking stream of the test's own. Bytes of a
// device buffer that are no element must keep their fill pattern, and saved pieces must be
// unchanged.
//
// Exits 77 (ctest: skipped) when no GPU is visible. WEFT_TEST_INJECT=1 corrupts one element of
// every non-empty loaded piece before it is checked (injection.h); the program then passes only
// when every corruption was caught.
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <weft/weft.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "rank_device.h"
#include "device_sharding_ref.h"
#include "injection.h"
#include "mp_common.h"

using namespace device_sharding;

namespace {

int g_device = 0;  // the GPU of this rank's pieces

// ------------------------------------------------------------------ tensors

void failure(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what.c_str(), detail.c_str());
  ++g_failures;
}

weft_sharded_t make_sharded(const MeshDef& mesh, const Shape& global, weft_dtype_t dt, const Layout& layout,
                            const weft_tensor_t* local) {
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
  weft_sharded_t h = nullptr;
  MPT_OK(weft_sharded_create(mesh.handle, static_cast<int>(global.size()), global.data(), dt, pl.data(),
                             mesh.position() >= 0 ? local : nullptr, nullptr, &h));
  return h;
}

// A saved tensor: global shape, dtype, mesh and layout, this rank's device piece.
struct Saved {
  std::string name;
  MeshDef* mesh;
  Shape global;
  Layout layout;
  weft_dtype_t dt;
  View view;
  uint64_t seed;
  std::unique_ptr<Piece> piece;
  weft_sharded_t handle = nullptr;

  void make() {
    const int pos = mesh->position();
    weft_tensor_t t{};
    if (pos >= 0) {
      const std::vector<int> c = mesh->coords(pos);
      const Box b = box_of(*mesh, layout, global, c);
      const size_t e = elem_size(dt);
      piece = std::make_unique<Piece>(b.shape, e, view);
      piece->for_each([&](const Shape& idx, int64_t) {
        Shape gi(idx.size());
        for (size_t d = 0; d < idx.size(); ++d) gi[d] = b.offset[d] + idx[d];
        const int64_t g = linear(global, gi);
        int64_t v = value(g, seed);
        for (size_t m = 0; m < layout.size(); ++m) {
          if (layout[m].kind == 'P') v = term(g, seed, c[m], mesh->shape[m]);
        }
        store(&piece->image[piece->offset_of(idx)], e, encode(dt, v));
      });
      piece->upload();
      t = piece->tensor(dt);
      t.device_id = g_device;
    }
    handle = make_sharded(*mesh, global, dt, layout, &t);
  }
};

// A load target: another mesh and layout, device (any view) or host memory.
struct Target {
  const Saved* saved;
  MeshDef* mesh;
  Layout layout;
  bool device;
  View view;
};

void load_and_check(const std::string& dir, const Target& tg) {
  const Saved& s = *tg.saved;
  const std::string what = "load of '" + s.name + "' (" + layout_name(s.layout) + ", " + dtype_text(s.dt) +
                           ", saved " + view_name(s.view) + ") as " + layout_name(tg.layout) + " into " +
                           (tg.device ? std::string("device memory, ") + view_name(tg.view) : "host memory");
  const int pos = tg.mesh->position();
  const size_t e = elem_size(s.dt);
  std::unique_ptr<Piece> dev;
  std::vector<unsigned char> host;
  Box b;
  std::vector<int> c;
  weft_tensor_t t{};
  if (pos >= 0) {
    c = tg.mesh->coords(pos);
    b = box_of(*tg.mesh, tg.layout, s.global, c);
    if (tg.device) {
      dev = std::make_unique<Piece>(b.shape, e, tg.view);
      dev->for_each([&](const Shape& idx, int64_t) { std::memset(&dev->image[dev->offset_of(idx)], kGarbage, e); });
      dev->upload();
      t = dev->tensor(s.dt);
      t.device_id = g_device;
    } else {
      host.assign(static_cast<size_t>(std::max<int64_t>(b.numel(), 1)) * e, kGarbage);
      t = weft_tensor_t{host.data(), WEFT_DEVICE_CPU, 0, static_cast<int>(b.shape.size()), s.dt, b.shape.data(),
                        nullptr, 0};
    }
  }
  weft_sharded_t h = make_sharded(*tg.mesh, s.global, s.dt, tg.layout, &t);
  const char* name = s.name.c_str();
  const weft_status_t st = weft_checkpoint_load(dir.c_str(), &name, &h, 1, nullptr);
  if (st != WEFT_OK) {
    failure(what, std::string("weft_checkpoint_load failed: ") + weft_status_string(st) + ": " + weft_last_error());
    weft_sharded_destroy(h);
    return;
  }
  if (pos >= 0) {
    const int64_t n = b.numel();
    std::vector<unsigned char> got, elems(static_cast<size_t>(n) * e);
    if (tg.device) {
      got = dev->download();
      dev->for_each([&](const Shape& idx, int64_t k) {
        std::memcpy(&elems[static_cast<size_t>(k) * e], &got[dev->offset_of(idx)], e);
      });
    } else if (!elems.empty()) {  // an empty piece has no buffer (memcpy of NULL is UB even for 0 bytes)
      std::memcpy(elems.data(), host.data(), elems.size());
    }
    bool zero = false;  // a PARTIAL(sum) coordinate other than 0 holds zeros
    for (size_t m = 0; m < tg.layout.size(); ++m) zero = zero || (tg.layout[m].kind == 'P' && c[m] != 0);
    std::vector<uint64_t> want(static_cast<size_t>(n));
    Shape idx(b.shape.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      Shape gi(idx.size());
      for (size_t d = 0; d < idx.size(); ++d) gi[d] = b.offset[d] + idx[d];
      want[static_cast<size_t>(k)] = encode(s.dt, zero ? 0 : value(linear(s.global, gi), s.seed));
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < b.shape[d]) break;
        idx[d] = 0;
      }
    }
    const bool injected = weft::gputest::inject(elems.data(), s.dt, want.size());
    size_t wrong = 0, first = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      if (load(&elems[k * e], e) == want[k]) continue;
      if (wrong++ == 0) first = k;
    }
    g_tally.record(what, injected, wrong != 0);
    if (injected != (wrong != 0)) {
      failure(what, wrong ? std::to_string(wrong) + " of " + std::to_string(want.size()) +
                                " elements wrong; first: element " + std::to_string(first) + " expected bits " +
                                std::to_string(want[first]) + ", got " + std::to_string(load(&elems[first * e], e))
                          : "the corrupted result (WEFT_TEST_INJECT) passed the check");
    }
    if (tg.device) {
      std::vector<bool> is_elem(dev->bytes, false);
      dev->for_each([&](const Shape& i, int64_t) {
        for (size_t x = 0; x < e; ++x) is_elem[dev->offset_of(i) + x] = true;
      });
      for (size_t x = 0; x < dev->bytes; ++x) {
        if (!is_elem[x] && got[x] != kGap) {
          failure(what, "byte " + std::to_string(x) + " of the device buffer is no element but was written");
          break;
        }
      }
    }
  }
  weft_sharded_destroy(h);
}

void create_mesh(weft_comm_t comm, MeshDef& m) {
  weft_mesh_config_t cfg = WEFT_MESH_CONFIG_INIT;
  cfg.ranks = m.ranks.data();
  cfg.nranks = m.ranks.size();
  MPT_OK(weft_mesh_create(comm, static_cast<int>(m.shape.size()), m.shape.data(), nullptr, &cfg, &m.handle));
}

std::string shared_tempdir(weft_comm_t comm) {
  char path[512] = {0};
  if (g_rank == 0) {
    const char* base = std::getenv("TMPDIR");
    std::snprintf(path, sizeof path, "%s/weft-ckpt-device-XXXXXX", base && *base ? base : "/tmp");
    if (!::mkdtemp(path)) mpt::die("mkdtemp(%s): %s", path, std::strerror(errno));
  }
  MPT_OK(weft_broadcast(path, sizeof path, WEFT_UINT8, 0, comm, nullptr, nullptr));
  return path;
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
  if (g_size < 2) mpt::die("run under weftrun with 2 or more ranks (the load mesh has n - 1)");
  // Each rank's pieces on a GPU of its own where there are enough (device_id says which), else
  // all on WEFT_DEVICE.
  g_device = weft::gputest::use_rank_device(g_rank, devices);
  cudaStreamCreateWithFlags(&g_readback, cudaStreamNonBlocking);

  const int n = g_size;
  std::vector<int> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
  int a = n;  // the 2-d mesh: smallest prime factor x the rest
  for (int f = 2; f < n; ++f) {
    if (n % f == 0) {
      a = f;
      break;
    }
  }
  MeshDef world{{n}, all};
  MeshDef grid{{a, n / a}, all};
  MeshDef fewer{{n - 1}, {}};  // the last n - 1 ranks in reverse order
  for (int r = n - 1; r >= 1; --r) fewer.ranks.push_back(r);
  create_mesh(w.comm, world);
  create_mesh(w.comm, grid);
  create_mesh(w.comm, fewer);

  const int64_t n2 = 2 * static_cast<int64_t>(n);
  const View C = View::contiguous, Pd = View::padded, T = View::transposed;
  Saved saved[] = {
      {"rows", &world, {n2 + 1, 3}, {S(0)}, WEFT_FLOAT32, C, 1, nullptr},
      {"cols strided", &world, {n + 2, n2 + 1}, {S(1)}, WEFT_FLOAT64, T, 2, nullptr},
      {"padded bf16", &world, {n2 + 1, 5}, {S(0)}, WEFT_BFLOAT16, Pd, 3, nullptr},
      {"partial", &world, {5, n2 + 1}, {Psum()}, WEFT_FLOAT32, Pd, 4, nullptr},
      {"grid partial", &grid, {7, 5}, {Psum(), S(0)}, WEFT_INT32, T, 5, nullptr},
      {"replicated", &world, {3, 4}, {R()}, WEFT_FLOAT32, C, 6, nullptr},
      // Over 8 MiB per piece, strided: staged through the device temporary in several chunks.
      {"big padded", &world, {n2, 1200001}, {S(0)}, WEFT_FLOAT32, Pd, 7, nullptr},
  };
  std::vector<const char*> names;
  std::vector<weft_sharded_t> handles;
  for (Saved& s : saved) {
    s.make();
    names.push_back(s.name.c_str());
    handles.push_back(s.handle);
  }
  const std::string dir = shared_tempdir(w.comm);
  weft_checkpoint_config_t cfg = WEFT_CHECKPOINT_CONFIG_INIT;
  cfg.fsync = 0;
  const weft_status_t st = weft_checkpoint_save(w.comm, dir.c_str(), names.data(), handles.data(), names.size(), &cfg);
  if (st != WEFT_OK) mpt::die("weft_checkpoint_save failed: %s: %s", weft_status_string(st), weft_last_error());
  for (const Saved& s : saved) {
    if (s.piece && s.piece->download() != s.piece->image) failure(s.name, "the saved device piece changed");
  }

  const Target targets[] = {
      {&saved[0], &fewer, {S(1)}, true, Pd},     {&saved[0], &world, {R()}, false, C},
      {&saved[1], &fewer, {S(0)}, true, C},      {&saved[1], &fewer, {S(1)}, true, T},
      {&saved[2], &fewer, {S(1)}, true, T},      {&saved[2], &world, {S(1)}, false, C},
      {&saved[3], &fewer, {S(1)}, true, T},      {&saved[3], &fewer, {Psum()}, true, Pd},
      {&saved[3], &world, {R()}, false, C},      {&saved[4], &fewer, {R()}, true, Pd},
      {&saved[4], &grid, {S(1), Psum()}, true, C}, {&saved[5], &fewer, {S(0)}, true, T},
      {&saved[6], &fewer, {S(0)}, true, Pd},
  };
  for (const Target& t : targets) load_and_check(dir, t);

  // Every rank done reading before rank 0 removes the directory.
  if (weft_barrier(w.comm, nullptr, nullptr) != WEFT_OK) failure("barrier", weft_last_error());
  if (g_rank == 0) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  for (Saved& s : saved) weft_sharded_destroy(s.handle);
  for (MeshDef* m : {&world, &grid, &fewer}) weft_mesh_destroy(m->handle);
  weft_comm_destroy(w.comm);
  cudaStreamDestroy(g_readback);
  if (mpt::inject_enabled()) return g_tally.report(false) && g_failures == 0 ? 0 : 1;
  if (g_failures) {
    std::fprintf(stderr, "rank %d: %d failure(s)\n", g_rank, g_failures);
    return 1;
  }
  std::printf("rank %d: %zu checkpoint loads of device-saved tensors match the reference\n", g_rank,
              sizeof targets / sizeof targets[0]);
  return 0;
}
