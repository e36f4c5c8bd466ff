// One gradient bucket's reduction over a communicator (weft/training.h): the plain all-reduce or
// reduce-scatter of core/collectives, or the compressed form (encode, all-to-all, decode and sum
// in float32 in rank order, and for an all-reduce encode once more and all-gather). Shared by the
// bucketer and ZeRO, which differ only in where the buckets live and when they are launched.
// The compressed form takes any codec (core/training/codec.h: the built-in BF16 and FP8_E4M3, or
// a plugin's), and optionally error feedback on each rank's own encode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/comm/comm.h"
#include "core/comm/executor.h"
#include "core/common/dtype.h"
#include "core/training/codec.h"

namespace weft::training {

enum class Reduction { allreduce, reduce_scatter };

struct ReduceSpec {
  Reduction kind = Reduction::allreduce;
  std::shared_ptr<const Codec> codec;  // nullptr: NATIVE (the dtype's own collectives)
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::avg;  // sum or avg
};

// What one reduction of nranks * chunk elements moves, in ZeRO's count (an all-reduce of n is 2n,
// a reduce-scatter or an all-gather n, an all-to-all n) and in wire bytes.
struct Volume {
  uint64_t elements = 0;
  uint64_t bytes = 0;
  Volume& operator+=(const Volume& o) {
    elements += o.elements;
    bytes += o.bytes;
    return *this;
  }
};
// The wire bytes of a compressed reduction are the codec's bytes(chunk) per chunk exchanged.
Volume reduction_volume(const ReduceSpec& spec, size_t chunk, int nranks);

// The weft_wire_format_t value of spec's wire (0 for NATIVE): what every rank must agree on.
inline int wire_id(const ReduceSpec& spec) { return spec.codec ? spec.codec->id() : 0; }

// Reduces data (nranks * chunk elements of spec.dtype, zero beyond the real ones) over comm.
// allreduce: the result replaces data. reduce_scatter: this rank's chunk of the result goes to
// shard (chunk elements; shard may be data + rank * chunk). Run where comm's operations run.
// residual: nullptr, or (compressed wires only) nranks * chunk float32 residuals of error
// feedback, one per element of data: this rank's own encode of each chunk (the first encode,
// the only one that carries this rank's gradient alone) adds them in and keeps what it lost
// (codec.h, encode_with_feedback); the all-reduce's second encode, of the reduced sum, has none.
// data is overwritten with g + residual there (weft's bucket memory, not the caller's).
void reduce_bucket(Comm& comm, const ReduceSpec& spec, void* data, size_t chunk, void* shard,
                   float* residual = nullptr);

// Queues work on comm's executor (after everything issued on comm before), so it runs while the
// caller goes on; the task fails with the communicator's error when it was aborted meanwhile.
std::shared_ptr<Task> start_on(const std::shared_ptr<Comm>& comm, std::function<void()> work);

// start_on, then waits for the work and throws its error.
void run_on(const std::shared_ptr<Comm>& comm, std::function<void()> work);

// torch.chunk's rule: elements per rank for n elements over nranks (0 for n = 0).
inline size_t chunk_of(size_t n, int nranks) { return (n + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks); }

}  // namespace weft::training
