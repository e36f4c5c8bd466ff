#include "core/training/zero_state.h"

#include <cstring>
#include <memory>

#include "core/common/status.h"
#include "core/sharding/checkpoint_load.h"
#include "core/sharding/checkpoint_save.h"

namespace weft::training {

namespace {

constexpr int64_t kFormatVersion = 1;
constexpr size_t kHeaderWords = 6;        // version, nparams, optimizer, state buffers, steps, loss scale bits
constexpr size_t kParamWords = 2 + shard::kMaxTensorDims;  // group, ndim, extents (zero-filled)

const char* const kStateNames[3] = {"master", "state1", "state2"};

// One row per coordinate of the mesh's other dims: those dims shard tensor dim 0 (nested, one
// row each), the data-parallel dim shards dim 1 (or replicates it).
shard::Layout layout_of(const Zero& z, bool split_dp) {
  shard::Layout layout(static_cast<size_t>(z.mesh()->ndims()));
  for (int d = 0; d < z.mesh()->ndims(); ++d) {
    shard::Placement& p = layout[static_cast<size_t>(d)];
    if (d != z.dp_dim()) {
      p.kind = shard::Kind::shard;
      p.dim = 0;
    } else if (split_dp) {
      p.kind = shard::Kind::shard;
      p.dim = 1;
    }
  }
  return layout;
}

int64_t rows_of(const Zero& z) {
  int64_t t = 1;
  for (int d = 0; d < z.mesh()->ndims(); ++d) {
    if (d != z.dp_dim()) t *= z.mesh()->shape()[static_cast<size_t>(d)];
  }
  return t;
}

std::shared_ptr<shard::Sharded> tensor(const Zero& z, const std::string& name, DType dtype, int64_t width, void* local,
                                       int64_t local_width, bool split_dp) {
  auto t = std::make_shared<shard::Sharded>();
  t->mesh = z.mesh();
  t->global = {rows_of(z), width};
  t->dtype = dtype;
  t->layout = layout_of(z, split_dp);
  t->name = name;
  const int64_t extent[2] = {1, local_width};
  t->local = kernels::StridedView::contiguous(local_width ? local : nullptr, dtype_size(dtype), 2, extent);
  return t;
}

size_t nstate(const Zero& z) {
  const ZeroConfig& c = z.config();
  if (c.optimizer == kernels::OptimizerKind::sgd) return c.momentum != 0.0f ? 1 : 0;
  return 2;
}

std::vector<int64_t> header_of(const Zero& z) {
  uint32_t scale_bits;
  const float scale = z.loss_scale();
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  return {kFormatVersion, static_cast<int64_t>(z.num_params()), static_cast<int64_t>(z.config().optimizer),
          static_cast<int64_t>(nstate(z)), z.steps_taken(), static_cast<int64_t>(scale_bits)};
}

std::vector<int64_t> params_of(const Zero& z) {
  std::vector<int64_t> out(z.num_params() * kParamWords, 0);
  for (size_t i = 0; i < z.num_params(); ++i) {
    int64_t* w = out.data() + i * kParamWords;
    const ParamSpec& p = z.param_spec(i);
    w[0] = static_cast<int64_t>(z.group_of(i));
    w[1] = static_cast<int64_t>(p.shape.size());
    for (size_t d = 0; d < p.shape.size(); ++d) w[2 + d] = p.shape[d];
  }
  return out;
}

std::string describe_shape(const int64_t* w) {
  std::string s = "[";
  for (int64_t d = 0; d < w[1]; ++d) s.append(d ? ", " : "").append(std::to_string(w[2 + d]));
  return s.append("]");
}

const char* optimizer_name(int64_t k) {
  switch (k) {
    case 0: return "SGD";
    case 1: return "Adam";
    case 2: return "AdamW";
  }
  return "an unknown optimizer";
}

// The state tensors of every group, in a fixed order (names sort the same on every rank).
void state_tensors(Zero& z, std::vector<std::string>& names, std::vector<std::shared_ptr<const shard::Sharded>>& out) {
  const size_t k = nstate(z);
  for (size_t g = 0; g < z.num_groups(); ++g) {
    const Zero::ShardState s = z.shard_state(g);
    float* bufs[3] = {s.master, s.state1, s.state2};
    for (size_t b = 0; b < 1 + k; ++b) {
      names.push_back(std::string("zero.group").append(std::to_string(g)).append(".").append(kStateNames[b]));
      out.push_back(tensor(z, names.back(), DType::f32, static_cast<int64_t>(s.total), bufs[b], static_cast<int64_t>(s.count), true));
    }
  }
}

}  // namespace

void zero_save(Zero& z, const std::string& dir) {
  std::vector<int64_t> header = header_of(z), params = params_of(z);
  std::vector<std::string> names = {"zero.header", "zero.params"};
  std::vector<std::shared_ptr<const shard::Sharded>> tensors = {
      tensor(z, names[0], DType::i64, static_cast<int64_t>(header.size()), header.data(), static_cast<int64_t>(header.size()), false),
      tensor(z, names[1], DType::i64, static_cast<int64_t>(params.size()), params.data(), static_cast<int64_t>(params.size()), false)};
  state_tensors(z, names, tensors);
  shard::checkpoint_save(*z.mesh()->whole(), dir, names, tensors, shard::SaveOptions{});
}

void zero_load(Zero& z, const std::string& dir) {
  const std::vector<int64_t> want = header_of(z), want_params = params_of(z);
  std::vector<int64_t> header(kHeaderWords);
  shard::checkpoint_load(dir, {"zero.header"},
                         {tensor(z, "zero.header", DType::i64, kHeaderWords, header.data(), kHeaderWords, false)});
  if (header[0] != kFormatVersion) {
    fail(Status::mismatch, "%s: ZeRO state format %lld, this weft reads %lld", dir.c_str(),
         static_cast<long long>(header[0]), static_cast<long long>(kFormatVersion));
  }
  if (header[1] != want[1]) {
    fail(Status::mismatch, "%s holds the state of %lld parameters; this ZeRO handle has %lld", dir.c_str(),
         static_cast<long long>(header[1]), static_cast<long long>(want[1]));
  }
  if (header[2] != want[2] || header[3] != want[3]) {
    fail(Status::mismatch, "%s was saved by %s with %lld state buffers; this ZeRO handle runs %s with %lld", dir.c_str(),
         optimizer_name(header[2]), static_cast<long long>(header[3]), optimizer_name(want[2]),
         static_cast<long long>(want[3]));
  }
  std::vector<int64_t> params(want_params.size());
  shard::checkpoint_load(dir, {"zero.params"},
                         {tensor(z, "zero.params", DType::i64, static_cast<int64_t>(params.size()), params.data(),
                                 static_cast<int64_t>(params.size()), false)});
  for (size_t i = 0; i < z.num_params(); ++i) {
    const int64_t* got = params.data() + i * kParamWords;
    const int64_t* mine = want_params.data() + i * kParamWords;
    if (!std::equal(got + 1, got + kParamWords, mine + 1)) {
      fail(Status::mismatch, "%s: parameter %zu (%s) has shape %s in the checkpoint and %s here", dir.c_str(), i,
           z.param_spec(i).name.c_str(), describe_shape(got).c_str(), describe_shape(mine).c_str());
    }
    if (got[0] != mine[0]) {
      fail(Status::mismatch, "%s: parameter %zu (%s) is in group %lld in the checkpoint and %lld here (make the handle with the same groups)",
           dir.c_str(), i, z.param_spec(i).name.c_str(), static_cast<long long>(got[0]), static_cast<long long>(mine[0]));
    }
  }
  std::vector<std::string> names;
  std::vector<std::shared_ptr<const shard::Sharded>> tensors;
  state_tensors(z, names, tensors);
  shard::checkpoint_load(dir, names, tensors);
  float scale;
  const uint32_t bits = static_cast<uint32_t>(header[5]);
  std::memcpy(&scale, &bits, sizeof scale);
  z.restore(header[4], scale);
}

}  // namespace weft::training
