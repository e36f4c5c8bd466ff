// A sharded tensor as core/ sees it (weft/mesh.h, "sharded tensors"): global shape, dtype,
// mesh, layout, and this rank's local piece as a strided view of caller memory.
#pragma once

#include <memory>
#include <string>

#include "core/common/dtype.h"
#include "core/mesh/mesh.h"
#include "core/sharding/layout.h"
#include "kernels/cpu/strided_copy.h"

namespace weft::shard {

struct Sharded {
  std::shared_ptr<mesh::Mesh> mesh;
  Shape global;
  DType dtype = DType::f32;
  Layout layout;
  std::string name = "tensor";
  // This rank's piece (members only; base NULL on a descriptor or when the piece is empty).
  kernels::StridedView local;
  bool on_device = false;  // CUDA device memory (weft_tensor_t device_type WEFT_DEVICE_CUDA)
  int device = -1;         // its GPU when on_device (weft_tensor_t device_id)

  int ndim() const { return static_cast<int>(global.size()); }
  // The box held by mesh member pos (this rank's when pos < 0).
  Box box_of(int pos) const { return mesh->box_of(pos < 0 ? mesh->position() : pos, global, layout); }
};

}  // namespace weft::shard
