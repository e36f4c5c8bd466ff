// What the parts of weft_mp_regions share (test_regions.cpp: weft_region_apply;
// test_regions_ring.cpp: weft_ring_shift, bad input, the overhead measurement): the meshes, the
// failure count and injection tally, completing a request, and checking a local buffer against
// expected values from the reference (sharding_reference.h), never from weft.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "inject.h"
#include "inputs.h"
#include "mp_common.h"
#include "redistribute_cases.h"
#include "sharded_buffer.h"
#include "sharding_reference.h"

namespace mpt::regions {

// A mesh the program made (collectively, at start-up): its handle, its shape as the reference
// sees it (mesh position -> world rank, row-major) and its dim names.
struct MeshInfo {
  std::string name;  // "w4", "2x2"
  weft_mesh_t handle = nullptr;
  shard::Mesh ref;
  std::vector<std::string> dims;

  int position(int world_rank) const { return ref.position_of_parent(world_rank); }
  // The mesh position of the member with coordinate c along dim and this rank's elsewhere.
  int along(int pos, int dim, int c) const {
    std::vector<int> co = ref.coords(pos);
    co[static_cast<size_t>(dim)] = c;
    return ref.mesh_rank_of(co);
  }
};

struct Env {
  World world;
  std::vector<MeshInfo> meshes;
  int failures = 0;  // checks that failed on this rank (cases)
  int run = 0;       // cases run
  bool quiet = false;   // injection runs: no line per (expected) failure
  bool injected = false;  // the current case corrupted a result
  bool full = false;
  InjectTally tally;      // injection runs: per part and dtype
};

// One failed check of the current case.
void fail_case(Env& env, const std::string& what, const std::string& detail);

// Completes a request as `form` says (weft_wait, or weft_test polling), then checks that
// weft_test reports it done and frees it. Dies when weft reports an error.
void complete(Env& env, const std::string& what, Form form, weft_request_t req);

// Every element of buf against want(local index) (bit patterns of dt); one line for all the wrong
// ones. Returns the number wrong.
size_t check_elements(Env& env, const std::string& what, const char* name, const LocalBuffer& buf, weft_dtype_t dt,
                      const std::function<uint64_t(const int64_t* idx)>& want);
// Guards and the bytes between a strided view's elements: untouched.
void check_memory(Env& env, const std::string& what, const char* name, const LocalBuffer& buf);
// WEFT_TEST_INJECT=1: corrupts the middle element of a non-empty result (inject.h's rule).
void maybe_inject(Env& env, LocalBuffer& buf, weft_dtype_t dt);

// The parts in test_regions_ring.cpp. Every rank calls them in the same order.
void run_ring_part(Env& env, bool full, int only);
void run_bad_input_part(Env& env);
void run_bench(Env& env, int iterations);

// The dtypes that a region may sum in the tests (float dtypes and int32), and all 12.
const std::vector<weft_dtype_t>& sum_dtypes();
const std::vector<weft_dtype_t>& all_dtypes();

}  // namespace mpt::regions
