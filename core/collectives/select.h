// Algorithm choice per call: the communicator's forced choice (WEFT_ALGO_*) if any, else by
// message size and rank count. The thresholds are first guesses that the host benchmark
// issue replaces with measured crossover points.
#pragma once

#include <cstddef>

#include "core/comm/comm.h"

namespace weft::coll {

// `shm` is chosen (when forced or automatic) only if comm.shm_possible(); pass
// allow_shm = false to get the point-to-point choice after the shared-memory path declined.
// A forced shm (WEFT_ALGO_*=shm) that cannot run throws WEFT_ERR_UNSUPPORTED saying why.
AllreduceAlgo choose_allreduce(const Comm& comm, size_t bytes, size_t count, bool allow_shm = true);
BroadcastAlgo choose_broadcast(const Comm& comm, size_t bytes, size_t count, bool allow_shm = true);
ReduceAlgo choose_reduce(const Comm& comm, size_t bytes, size_t count, bool allow_shm = true);
AllgatherAlgo choose_allgather(const Comm& comm, size_t total_bytes, bool allow_shm = true);
ReduceScatterAlgo choose_reduce_scatter(const Comm& comm, bool allow_shm = true);
AlltoallAlgo choose_alltoall(const Comm& comm, bool allow_shm = true);
BarrierAlgo choose_barrier(const Comm& comm, bool allow_shm = true);

const char* algo_name(AllreduceAlgo a);
const char* algo_name(BroadcastAlgo a);
const char* algo_name(ReduceAlgo a);
const char* algo_name(AllgatherAlgo a);

}  // namespace weft::coll
