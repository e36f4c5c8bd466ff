#include "core/training/reduction.h"

#include <cstdint>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/common/status.h"

namespace weft::training {

Volume reduction_volume(const ReduceSpec& spec, size_t chunk, int nranks) {
  const uint64_t n = static_cast<uint64_t>(chunk) * static_cast<uint64_t>(nranks);
  Volume v;
  if (!spec.codec) {
    v.elements = spec.kind == Reduction::allreduce ? 2 * n : n;
    v.bytes = v.elements * dtype_size(spec.dtype);
    return v;
  }
  // all-to-all of every chunk, plus for an all-reduce the all-gather of the reduced chunks.
  const uint64_t rounds = spec.kind == Reduction::allreduce ? 2 : 1;
  v.elements = rounds * n;
  v.bytes = rounds * static_cast<uint64_t>(nranks) * spec.codec->bytes(chunk);
  return v;
}

namespace {

// The compressed reduction: float32 data only (training.h refuses other dtypes before here).
void reduce_compressed(Comm& comm, const ReduceSpec& spec, float* data, size_t chunk, float* shard, float* residual) {
  const Codec& codec = *spec.codec;
  const size_t n = static_cast<size_t>(comm.size());
  const size_t wire = codec.bytes(chunk);
  if (wire > SIZE_MAX / n) {
    fail(Status::invalid_argument, "%s: bytes(%zu) = %zu; %zu ranks' chunks do not fit in memory", codec.name().c_str(),
         chunk, wire, n);
  }
  std::vector<unsigned char> send(n * wire), recv(n * wire);
  for (size_t q = 0; q < n; ++q) {
    if (residual) {
      encode_with_feedback(codec, data + q * chunk, chunk, send.data() + q * wire, residual + q * chunk);
    } else {
      codec.encode(data + q * chunk, chunk, send.data() + q * wire);
    }
  }
  coll::alltoall(comm, send.data(), recv.data(), wire, DType::u8);
  // This rank's chunk: the ranks' terms summed in rank order, so every rank's result is the same
  // bits whichever rank reduced it.
  std::vector<float> acc(chunk), scratch;
  codec.decode(recv.data(), chunk, acc.data());
  for (size_t q = 1; q < n; ++q) codec.decode_add(recv.data() + q * wire, chunk, acc.data(), scratch);
  if (spec.op == ReduceOp::avg) {
    for (float& x : acc) x /= static_cast<float>(n);
  }
  if (spec.kind == Reduction::reduce_scatter) {
    std::copy(acc.begin(), acc.end(), shard);
    return;
  }
  codec.encode(acc.data(), chunk, send.data());
  coll::allgather(comm, send.data(), recv.data(), wire, DType::u8);
  for (size_t q = 0; q < n; ++q) codec.decode(recv.data() + q * wire, chunk, data + q * chunk);
}

}  // namespace

void reduce_bucket(Comm& comm, const ReduceSpec& spec, void* data, size_t chunk, void* shard, float* residual) {
  const size_t n = chunk * static_cast<size_t>(comm.size());
  if (spec.codec) {
    reduce_compressed(comm, spec, static_cast<float*>(data), chunk, static_cast<float*>(shard), residual);
    return;
  }
  if (residual) fail(Status::internal, "error feedback on a NATIVE wire (the C shims refuse it)");
  if (spec.kind == Reduction::allreduce) {
    coll::allreduce(comm, data, data, n, spec.dtype, spec.op);
    return;
  }
  coll::reduce_scatter(comm, data, shard, chunk, spec.dtype, spec.op);
}

std::shared_ptr<Task> start_on(const std::shared_ptr<Comm>& comm, std::function<void()> work) {
  return comm->executor().submit([comm, work = std::move(work)] {
    comm->throw_if_unusable();
    work();
  });
}

void run_on(const std::shared_ptr<Comm>& comm, std::function<void()> work) {
  std::shared_ptr<Task> t = start_on(comm, std::move(work));
  t->wait();
  t->rethrow();
}

}  // namespace weft::training
