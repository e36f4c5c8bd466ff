// The collective cases of weft_gpu_mp_device (mp_device.cpp) and what each must produce.
//
// Inputs and expected values come from the test suite's single-process reference
// (tests/multiproc/inputs.h, reference.h), which shares no code with weft: mpt::Source gives
// every rank's input element from (case seed, rank, index), so each rank builds the exact
// expected result locally; reductions are expected as mpt::reduce_reference says (weft.h's
// reduction rules) and compared by mpt::Expectation::matches; data movement is compared bit
// for bit. Nothing here calls weft except the collective under test.
#pragma once

#include <weft/weft.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "inputs.h"
#include "reference.h"

namespace weft::gputest {

struct World {
  weft_comm_t comm;
  int rank;
  int size;
};

struct Buffers {
  void* send;
  void* recv;
};

using Call = std::function<weft_status_t(Buffers b, void* stream, weft_request_t* req)>;

// Element i of a result: the reference reduction (reduced), else exact bits.
struct Want {
  bool reduced = false;
  uint64_t bits = 0;
  mpt::Expectation expect;
};

struct DeviceCase {
  std::string name;           // "allreduce sum, exact inputs"
  weft_dtype_t dt;
  weft_op_t op;               // reducing collectives; unused otherwise
  mpt::Compare compare;       // for reduced elements
  std::vector<uint8_t> send;  // this rank's input
  size_t recv_count;          // elements of the result buffer
  bool in_place;              // the call reads its input from the result buffer (send is copied there)
  Call call;
  std::function<Want(size_t)> want;  // expected element i of the result buffer
};

// allreduce (out of place and in place), reduce and reduce_scatter, for every op, `n` elements
// per rank (per block for reduce_scatter) with inputs of kind `input`.
std::vector<DeviceCase> reducing_cases(const World& w, weft_dtype_t dt, size_t n, mpt::Input input);

// broadcast, allgather, allgatherv, alltoall (out of place and in place), alltoallv, gather and
// scatter of raw bit patterns, `n` elements per rank or block (uneven counts for the v forms).
std::vector<DeviceCase> moving_cases(const World& w, weft_dtype_t dt, size_t n);

}  // namespace weft::gputest
