// The structs behind weft_bucketer_t and weft_zero_t, their registries, and the argument
// readers the training shims share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "capi/src/mesh_handles.h"
#include "core/training/bucketer.h"
#include "core/training/zero.h"
#include "weft/training.h"

struct weft_bucketer {
  uint64_t magic;
  std::shared_ptr<weft::Comm> comm;
  std::unique_ptr<weft::training::Bucketer> bucketer;
  weft_op_t op;
  // What weft_bucketer_shard hands back (its shape array lives here).
  std::vector<int64_t> shard_extent;
};

struct weft_zero {
  uint64_t magic;
  std::unique_ptr<weft::training::Zero> zero;
  // weft_zero_param's views point at these shapes.
  std::vector<std::vector<int64_t>> shapes;
};

namespace weft::capi {

constexpr uint64_t kBucketerMagic = 0x746b6342746665ull;  // "wefBckt"
constexpr uint64_t kZeroMagic = 0x6f72655a74666577ull;    // "weftZero"

weft_bucketer_t register_bucketer(std::unique_ptr<weft_bucketer> b);
weft_bucketer* lookup_bucketer(weft_bucketer_t h, const char* arg);
void unregister_bucketer(weft_bucketer_t h);

weft_zero_t register_zero(std::unique_ptr<weft_zero> z);
weft_zero* lookup_zero(weft_zero_t h, const char* arg);
void unregister_zero(weft_zero_t h);

// The codec of a weft_wire_format_t (nullptr for NATIVE): a built-in one or a plugin codec's id
// (64 and up), refused with the ids that exist otherwise; every compressed wire needs float32
// data (`dtype`). what: "config" (messages say config.wire).
std::shared_ptr<const training::Codec> read_wire(const weft_wire_format_t& wire, DType dtype, const char* what);
// error_feedback (what: "config"): 0 or 1 (nonzero), compressed wires only.
bool read_error_feedback(int error_feedback, const training::Codec* codec, const char* what);
// The mesh dim called `name` (arg names it in messages).
int mesh_dim_named(const mesh::Mesh& mesh, const char* name, const char* arg);
// A contiguous tensor's element count (arg names it); refuses strides that are not row-major,
// and device memory unless allow_device.
size_t contiguous_count(const weft_tensor_t& t, const char* arg, bool allow_device = false);
// "names[i]" when names is non-NULL and names[i] is, else fallback + "[i]".
std::string item_name(const char* const* names, size_t i, const char* fallback);

}  // namespace weft::capi
