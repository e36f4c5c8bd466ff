// The case list of weft_mp_redistribute: which meshes, layouts, shapes, dtypes, local views and
// call forms run at a given number of ranks, in CI (default) and in the full matrix (--full).
//
// Parts (every rank builds the same list in the same order; "--part=P --case=K" repeats one):
//   mesh1d   the world as a 1-d mesh: every pair of {S(0), S(1), R, P(sum), P(max)} (S(1) only
//            for tensors of 2+ dims) on scalars, 1-d (sizes 0, 1, n-1, 2n+1), 2-d ({5,3},
//            {1,2n+1}, {0,4}, {3,0}), 3-d ({n+1,2,3}, {2,0,3}) and 4-d ({2,3,1,n+2}) tensors; f32.
//   mesh2d   2-d meshes over the world (every factorisation a x b; prime counts give 1 x n and
//            n x 1): every pair of layouts from {S(0), S(1), R, P(sum), P(max)}^2 that differ on
//            at most one mesh dim (each dim independently, the other held at each placement);
//            --full: every pair. CI: the first 2-d mesh, shapes {5,7}, {1,3}, {3,4,2}.
//   nested   two (or three, 8 ranks) mesh dims sharding the same tensor dim, to and from other
//            layouts, on uneven shapes ({7,5}, {3,2}).
//   dtypes   all 12 dtypes x a representative set of transitions (including P(avg), P(min) and
//            R -> P), on the 1-d mesh and the first 2-d mesh; --full: every 1-d transition.
//   views    source and destination local views contiguous, padded (row stride larger than the
//            row, and a byte_offset) or transposed (column-major strides), all 9 pairings.
//   m2m      between two meshes made from the world: n -> n reversed, n -> 1, 1 -> n, 3 <-> 2,
//            4 <-> 2 and 3 <-> 5 on overlapping rank sets (permuted orders), the same on disjoint
//            sets where the world is big enough, and a 1-d mesh <-> a 2-d mesh; sources S, R and
//            P(sum), destinations S, R, P(sum) and P(max) (a destination PARTIAL dim is the
//            REPLICATE -> PARTIAL rule of mesh.h); views rotate through all 9 pairings.
//   large    pieces of a few MiB (1000003 and 513 x 1031 elements): the large-message paths,
//            on the 1-d mesh, the first 2-d mesh and between meshes (4 -> 2 and back).
// Every case runs in one of three forms by its index: blocking, request + weft_wait, request +
// weft_test polling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sharding_reference.h"
#include "weft/weft.h"

namespace mpt {

// A mesh the program creates at start-up (collectively, every rank, in table order).
struct MeshDef {
  std::string name;         // "w4", "2x2", "m2m:4>2:dst"
  shard::Mesh mesh;         // shape and parent ranks in mesh order
  bool explicit_ranks = false;  // pass mesh.ranks through weft_mesh_config_t
};

// How a local piece is laid out in memory.
enum class View { contiguous = 0, padded = 1, transposed = 2 };
const char* view_name(View v);

enum class Form { blocking = 0, wait = 1, poll = 2 };
const char* form_name(Form f);

struct RCase {
  std::string part;
  int src_mesh = 0, dst_mesh = 0;  // indices into the mesh table
  shard::Layout src, dst;
  shard::Shape global;
  weft_dtype_t dt = WEFT_FLOAT32;
  View src_view = View::contiguous, dst_view = View::contiguous;
  Form form = Form::blocking;
  int index = 0;                   // position within its part (the repro: --part --case)

  uint64_t seed() const;
  std::string describe(const std::vector<MeshDef>& meshes) const;
};

struct CaseFilter {
  std::vector<std::string> parts;  // empty = the CI parts
  std::vector<std::string> dtypes; // empty = all
  bool full = false;
};

std::vector<MeshDef> build_meshes(int nranks);
// weft_mesh_create over `comm` for d (collective over comm): dim names "d0" (the default) for
// 1-d meshes, "dp","tp" / "a","b" (explicit rank lists) for 2-d, "pp","dp","tp" for 3-d.
weft_status_t create_mesh(weft_comm_t comm, const MeshDef& d, weft_mesh_t* out);
// The names create_mesh gives d's dims.
std::vector<std::string> dim_names(const MeshDef& d);
std::vector<RCase> build_cases(int nranks, const std::vector<MeshDef>& meshes, const CaseFilter& f);
const std::vector<std::string>& all_parts();

}  // namespace mpt
