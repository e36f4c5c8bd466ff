// Algorithm choice per call: the communicator's forced choice (WEFT_ALGO_*) if any, else by
// message size and rank count. The thresholds are first guesses that the host benchmark
// issue replaces with measured crossover points.
#pragma once

#include <cstddef>

#include "core/comm/comm.h"

namespace weft::coll {

AllreduceAlgo choose_allreduce(const Comm& comm, size_t bytes, size_t count);
BroadcastAlgo choose_broadcast(const Comm& comm, size_t bytes, size_t count);
ReduceAlgo choose_reduce(const Comm& comm, size_t bytes, size_t count);
AllgatherAlgo choose_allgather(const Comm& comm, size_t total_bytes);

const char* algo_name(AllreduceAlgo a);
const char* algo_name(BroadcastAlgo a);
const char* algo_name(ReduceAlgo a);
const char* algo_name(AllgatherAlgo a);

}  // namespace weft::coll
