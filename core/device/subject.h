// What a device wait or NCCL call belongs to, for messages:
// "allreduce (nccl) #12 on comm 'w' rank 0/2".
#pragma once

#include <cstdint>
#include <string>

#include "core/comm/comm.h"

namespace weft::gpu {

constexpr uint32_t kNoSequence = ~uint32_t{0};

struct DeviceSubject {
  const char* operation;
  const char* path;   // "nccl" or "staged"
  uint32_t sequence;  // kNoSequence when the path has none of its own (staging: per chunk)
};

inline std::string subject_text(const Comm& comm, const DeviceSubject& s) {
  if (s.sequence == kNoSequence) return format("%s (%s) on %s", s.operation, s.path, comm.describe().c_str());
  return format("%s (%s) #%u on %s", s.operation, s.path, s.sequence, comm.describe().c_str());
}

}  // namespace weft::gpu
