#include "redistribution.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include <weft/mesh.h>

namespace weftbench {
namespace {

// rows x cols near square, both multiples of n, rows * cols <= target (redistribution.h).
void grid(size_t target, size_t n, int64_t* rows, int64_t* cols) {
  size_t root = static_cast<size_t>(std::sqrt(static_cast<double>(target)));
  while (root * root > target) --root;
  while ((root + 1) * (root + 1) <= target) ++root;
  const size_t c = std::max(n, root / n * n);
  const size_t r = target / c / n * n;
  *rows = static_cast<int64_t>(r);
  *cols = static_cast<int64_t>(c);
}

weft_placement_t shard(int dim) {
  weft_placement_t p = WEFT_PLACEMENT_REPLICATE_INIT;
  p.kind = WEFT_SHARD;
  p.dim = dim;
  return p;
}
weft_placement_t replicate() { return WEFT_PLACEMENT_REPLICATE_INIT; }
weft_placement_t partial(weft_op_t op) {
  weft_placement_t p = WEFT_PLACEMENT_REPLICATE_INIT;
  p.kind = WEFT_PARTIAL;
  p.op = op;
  return p;
}

const char* step_kind_name(weft_redistribute_kind_t k) {
  switch (k) {
    case WEFT_STEP_LOCAL: return "local";
    case WEFT_STEP_ALLGATHER: return "allgather";
    case WEFT_STEP_ALLREDUCE: return "allreduce";
    case WEFT_STEP_REDUCE_SCATTER: return "reduce_scatter";
    case WEFT_STEP_ALLTOALL: return "alltoall";
    case WEFT_STEP_EXCHANGE: return "exchange";
  }
  return "?";
}

class RedistCase : public Bench {
 public:
  RedistCase(const Comm& comm, Coll c, const DtypeInfo& t, weft_op_t op, size_t max_bytes)
      : Bench(c, t), comm_(comm), op_(op) {
    const int64_t per_rank = t.max_exact_int / std::max(1, comm.nranks);
    sum_range_ = std::max<int64_t>(2, std::min<int64_t>(8, per_rank));
    pattern_range_ = std::min<int64_t>(t.max_exact_int, int64_t{1} << 20) + 1;
    // Every piece of every size holds at most max_bytes (the grid only rounds down), but a
    // smaller size can round down less than max_bytes does: size the buffers by the bound.
    src_buf_ = HostBuffer(max_bytes / t.size * t.size);
    dst_buf_ = HostBuffer(max_bytes / t.size * t.size);
    const int n = comm.nranks;
    check(weft_mesh_create(comm.comm, 1, &n, nullptr, nullptr, &mesh_), "weft_mesh_create");
    switch (c) {
      case Coll::redist_s2r:
        src_layout_ = shard(0);
        dst_layout_ = replicate();
        break;
      case Coll::redist_p2s:
        src_layout_ = partial(op);
        dst_layout_ = shard(0);
        break;
      default:  // redist_s0s1
        src_layout_ = shard(0);
        dst_layout_ = shard(1);
        break;
    }
  }

  ~RedistCase() override {
    release();
    weft_mesh_destroy(mesh_);
  }

  void prepare(const Shape& shape) override {
    release();
    rows_ = shape.rows;
    cols_ = shape.cols;
    const int64_t global[2] = {rows_, cols_};
    local_shape(src_layout_, src_shape_);
    local_shape(dst_layout_, dst_shape_);
    src_ = make(global, src_layout_, src_shape_, src_buf_, "src");
    dst_ = make(global, dst_layout_, dst_shape_, dst_buf_, "dst");
    print_plan(shape);
  }

  void issue(const Shape&, bool, std::vector<weft_request_t>* reqs) override {
    weft_request_t req = nullptr;
    check(weft_redistribute(src_, dst_, nullptr, reqs ? &req : nullptr), "weft_redistribute");
    if (reqs) reqs->push_back(req);
  }

  void fill(const Shape&, bool) override {
    std::memset(dst_buf_.data(), 0xFF, numel(dst_shape_) * t_.size);  // NaN / -1: never a value
    char* src = src_buf_.data();
    const size_t n = numel(src_shape_);
    if (coll_ == Coll::redist_p2s) {  // every rank holds a term of the whole tensor
      for (size_t g = 0; g < n; ++g) store(t_, src, g, term(comm_.rank, g));
      return;
    }
    const size_t first = row0() * static_cast<size_t>(cols_);  // S(0): consecutive rows
    for (size_t l = 0; l < n; ++l) store(t_, src, l, value(first + l));
  }

  size_t count_wrong(const Shape&, bool) const override {
    const char* dst = dst_buf_.data();
    const size_t cols = static_cast<size_t>(cols_);
    size_t wrong = 0;
    auto expect = [&](size_t l, double want) {
      if (!close_enough(t_, load(t_, dst, l), want)) ++wrong;
    };
    switch (coll_) {
      case Coll::redist_s2r:  // the whole tensor
        for (size_t g = 0; g < numel(dst_shape_); ++g) expect(g, value(g));
        break;
      case Coll::redist_p2s: {  // rows [row0, row0 + rows/n), reduced over the ranks' terms
        const size_t first = row0() * cols;
        for (size_t l = 0; l < numel(dst_shape_); ++l) expect(l, reduced(first + l));
        break;
      }
      default: {  // redist_s0s1: every row, columns [rank * cols/n, (rank+1) * cols/n)
        const size_t rows = static_cast<size_t>(dst_shape_[0]);
        const size_t width = static_cast<size_t>(dst_shape_[1]);
        const size_t col0 = static_cast<size_t>(comm_.rank) * width;
        for (size_t i = 0; i < rows; ++i)
          for (size_t j = 0; j < width; ++j) expect(i * width + j, value(i * cols + col0 + j));
        break;
      }
    }
    return wrong;
  }

 private:
  static size_t numel(const int64_t* shape) { return static_cast<size_t>(shape[0] * shape[1]); }
  size_t row0() const { return static_cast<size_t>(comm_.rank) * static_cast<size_t>(rows_ / comm_.nranks); }

  // The local shape under one placement (even shards: rows and cols divide by nranks).
  void local_shape(const weft_placement_t& p, int64_t* out) const {
    out[0] = rows_;
    out[1] = cols_;
    if (p.kind == WEFT_SHARD) out[p.dim] /= comm_.nranks;
  }

  weft_sharded_t make(const int64_t* global, const weft_placement_t& p, const int64_t* local_shape,
                      const HostBuffer& buf, const char* name) {
    weft_tensor_t v{};
    v.data = buf.data();
    v.device_type = WEFT_DEVICE_CPU;
    v.device_id = 0;
    v.ndim = 2;
    v.dtype = t_.dtype;
    v.shape = local_shape;
    v.strides = nullptr;  // contiguous row-major
    v.byte_offset = 0;
    weft_sharded_config_t cfg = WEFT_SHARDED_CONFIG_INIT;
    cfg.name = name;
    weft_sharded_t h = nullptr;
    check(weft_sharded_create(mesh_, 2, global, t_.dtype, &p, &v, &cfg, &h), "weft_sharded_create");
    return h;
  }

  void release() {
    weft_sharded_destroy(src_);
    weft_sharded_destroy(dst_);
    src_ = dst_ = nullptr;
  }

  // Rank 0 prints the steps weft plans, when they change from one size to the next.
  void print_plan(const Shape& shape) {
    weft_redistribute_step_t steps[8];
    size_t nsteps = 0;
    check(weft_redistribute_plan(src_, dst_, steps, 8, &nsteps), "weft_redistribute_plan");
    std::string plan;
    for (size_t i = 0; i < std::min<size_t>(nsteps, 8); ++i) {
      if (i) plan += ", ";
      plan += step_kind_name(steps[i].kind);
      if (steps[i].mesh_dim >= 0) plan += "(mesh dim " + std::to_string(steps[i].mesh_dim) + ")";
    }
    if (plan.empty()) plan = "no step";
    if (plan == last_plan_) return;
    last_plan_ = plan;
    if (comm_.rank != 0) return;
    std::printf("#  from %zu B (global %" PRId64 " x %" PRId64 "), weft_redistribute_plan: %s\n", shape.bytes,
                rows_, cols_, plan.c_str());
    std::fflush(stdout);
  }

  // Element g of the tensor (data movement), and rank r's term of it (PARTIAL).
  double value(size_t g) const {
    return static_cast<double>((g * 7 + 3) % static_cast<size_t>(pattern_range_));
  }
  double term(int r, size_t g) const {
    const size_t ur = static_cast<size_t>(r);
    switch (op_) {
      case WEFT_SUM:
      case WEFT_AVG: return static_cast<double>((ur * 3 + g * 5 + 1) % static_cast<size_t>(sum_range_));
      default:  // min, max
        return static_cast<double>((ur * 7 + g * 3 + 1) % static_cast<size_t>(pattern_range_));
    }
  }
  // The reduction of every rank's term (weft/common.h's rules), rounded to the type.
  double reduced(size_t g) const {
    const int n = comm_.nranks;
    if (t_.kind != Kind::floating) {
      int64_t acc = static_cast<int64_t>(term(0, g));
      for (int r = 1; r < n; ++r) {
        const int64_t v = static_cast<int64_t>(term(r, g));
        if (op_ == WEFT_MIN)
          acc = std::min(acc, v);
        else if (op_ == WEFT_MAX)
          acc = std::max(acc, v);
        else
          acc = wrap_int(t_, static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v)));
      }
      if (op_ == WEFT_AVG) acc /= n;
      return static_cast<double>(acc);
    }
    double acc = term(0, g);
    for (int r = 1; r < n; ++r) {
      const double v = term(r, g);
      if (op_ == WEFT_MIN)
        acc = std::min(acc, v);
      else if (op_ == WEFT_MAX)
        acc = std::max(acc, v);
      else
        acc += v;
    }
    if (op_ == WEFT_AVG) acc /= n;
    return round_to(t_, acc);
  }

  Comm comm_;
  weft_op_t op_;
  int64_t sum_range_;
  int64_t pattern_range_;
  weft_mesh_t mesh_ = nullptr;
  weft_placement_t src_layout_{}, dst_layout_{};
  HostBuffer src_buf_, dst_buf_;
  int64_t rows_ = 0, cols_ = 0;
  int64_t src_shape_[2] = {0, 0}, dst_shape_[2] = {0, 0};
  weft_sharded_t src_ = nullptr, dst_ = nullptr;
  std::string last_plan_;
};

}  // namespace

Shape redist_shape(Coll c, size_t requested_bytes, size_t elem_size, int nranks) {
  const size_t n = static_cast<size_t>(std::max(1, nranks));
  const size_t total = requested_bytes / elem_size;
  Shape s;
  // redist_s0s1: `size` is each rank's piece, as alltoall's buffer; the tensor is n times that.
  grid(c == Coll::redist_s0s1 ? total * n : total, n, &s.rows, &s.cols);
  const size_t global = static_cast<size_t>(s.rows * s.cols);
  switch (c) {
    case Coll::redist_s2r:  // as allgather: a 1/n piece in, the whole tensor out
      s.count = s.recvcount = global;
      s.sendcount = s.paramcount = global / n;
      break;
    case Coll::redist_p2s:  // as reduce_scatter: the whole tensor in, a 1/n piece out
      s.count = s.sendcount = global;
      s.recvcount = s.paramcount = global / n;
      break;
    default:  // redist_s0s1, as alltoall: a 1/n piece in and out
      s.count = s.sendcount = s.recvcount = global / n;
      s.paramcount = global / n / n;
      break;
  }
  s.bytes = s.count * elem_size;
  return s;
}

// PARTIAL(prod) and PARTIAL(a plugin operator) do not exist (weft/mesh.h).
bool redist_supports(Coll c, weft_op_t op) { return c != Coll::redist_p2s || (op != WEFT_PROD && !is_plugin_op(op)); }

std::unique_ptr<Bench> make_redistribution(const Comm& comm, Coll c, const DtypeInfo& t, weft_op_t op,
                                           size_t max_bytes) {
  return std::make_unique<RedistCase>(comm, c, t, op, max_bytes);
}

}  // namespace weftbench
