// Saving and loading a ZeRO handle's optimizer state through weft's distributed checkpoint
// (weft/training.h, weft_zero_save / weft_zero_load). Each group's float32 master weights and
// optimizer buffers are saved as a tensor [T, n] - T = the product of the mesh's other dims, one
// row each (a tensor-parallel shard keeps its own), n = the group's real elements, split over
// the data-parallel dim by torch.chunk's rule exactly as ZeRO partitions it - so a save on N
// data-parallel ranks loads on any other N. "zero.header" and "zero.params" record the
// parameter shapes, groups, optimizer, step count and loss scale, checked before any state is
// read.
#pragma once

#include <string>

#include "core/training/zero.h"

namespace weft::training {

// Collective over the mesh's members; run on the whole mesh communicator's executor.
void zero_save(Zero& zero, const std::string& dir);
void zero_load(Zero& zero, const std::string& dir);

}  // namespace weft::training
