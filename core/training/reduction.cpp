#include "core/training/reduction.h"

#include <vector>

#include "core/collectives/collectives.h"

namespace weft::training {

using kernels::WireFormat;

Volume reduction_volume(const ReduceSpec& spec, size_t chunk, int nranks) {
  const uint64_t n = static_cast<uint64_t>(chunk) * static_cast<uint64_t>(nranks);
  Volume v;
  if (spec.wire == WireFormat::native) {
    v.elements = spec.kind == Reduction::allreduce ? 2 * n : n;
    v.bytes = v.elements * dtype_size(spec.dtype);
    return v;
  }
  // all-to-all of every chunk, plus for an all-reduce the all-gather of the reduced chunks.
  const uint64_t rounds = spec.kind == Reduction::allreduce ? 2 : 1;
  v.elements = rounds * n;
  v.bytes = rounds * static_cast<uint64_t>(nranks) * kernels::wire_bytes(spec.wire, chunk);
  return v;
}

namespace {

// The compressed reduction: float32 data only (training.h refuses other dtypes before here).
void reduce_compressed(Comm& comm, const ReduceSpec& spec, float* data, size_t chunk, float* shard) {
  const size_t n = static_cast<size_t>(comm.size());
  const size_t wire = kernels::wire_bytes(spec.wire, chunk);
  std::vector<unsigned char> send(n * wire), recv(n * wire);
  for (size_t q = 0; q < n; ++q) kernels::wire_encode(spec.wire, data + q * chunk, chunk, send.data() + q * wire);
  coll::alltoall(comm, send.data(), recv.data(), wire, DType::u8);
  // This rank's chunk: the ranks' terms summed in rank order, so every rank's result is the same
  // bits whichever rank reduced it.
  std::vector<float> acc(chunk);
  kernels::wire_decode(spec.wire, recv.data(), chunk, acc.data());
  for (size_t q = 1; q < n; ++q) kernels::wire_decode_add(spec.wire, recv.data() + q * wire, chunk, acc.data());
  if (spec.op == ReduceOp::avg) {
    for (float& x : acc) x /= static_cast<float>(n);
  }
  if (spec.kind == Reduction::reduce_scatter) {
    std::copy(acc.begin(), acc.end(), shard);
    return;
  }
  kernels::wire_encode(spec.wire, acc.data(), chunk, send.data());
  coll::allgather(comm, send.data(), recv.data(), wire, DType::u8);
  for (size_t q = 0; q < n; ++q) kernels::wire_decode(spec.wire, recv.data() + q * wire, chunk, data + q * chunk);
}

}  // namespace

void reduce_bucket(Comm& comm, const ReduceSpec& spec, void* data, size_t chunk, void* shard) {
  const size_t n = chunk * static_cast<size_t>(comm.size());
  if (spec.wire != WireFormat::native) {
    reduce_compressed(comm, spec, static_cast<float*>(data), chunk, static_cast<float*>(shard));
    return;
  }
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
