// The executor's construction (weft_pipeline_create's checks, local and across ranks) and its
// buffer pool; the step itself is in executor_run.cpp.
#include "core/pipeline/executor.h"

#include <cstdlib>
#include <cstring>

#include "core/collectives/collectives.h"
#include "core/common/status.h"
#include "core/device/device_api.h"
#include "core/pipeline/executor_state.h"
#include "core/training/agreement.h"
#include "core/training/reduction.h"

namespace weft::pipeline {

size_t Boundary::bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

namespace {

// The first action of kind k in any list, for messages ("rank 0, action 5 (3B0)"); {-1, 0} if none.
std::pair<int, size_t> first_of(const Schedule& s, Kind k) {
  for (size_t r = 0; r < s.actions.size(); ++r)
    for (size_t i = 0; i < s.actions[r].size(); ++i)
      if (s.actions[r][i].kind == k) return {static_cast<int>(r), i};
  return {-1, 0};
}

void require_callback(const Schedule& s, Kind k, const StageFn& fn, const char* field) {
  auto [r, i] = first_of(s, k);
  if (r < 0 || fn) return;
  const Action& a = s.actions[static_cast<size_t>(r)][i];
  fail(Status::invalid_argument, "the schedule has %s actions (rank %d, action %zu (%s)) but config->%s is NULL",
       kind_name(k), r, i, to_string(a).c_str(), field);
}

void check_config(const Comm& comm, const Schedule& s, const ExecutorConfig& c) {
  if (comm.size() != s.ranks) {
    fail(Status::invalid_argument, "comm has %d ranks but the schedule is for %d ranks; expected equal sizes",
         comm.size(), s.ranks);
  }
  validate(s);
  if (!c.forward) fail(Status::invalid_argument, "config->forward is NULL; every schedule needs a forward callback");
  require_callback(s, Kind::B, c.backward, "backward");
  require_callback(s, Kind::I, c.backward_input, "backward_input");
  require_callback(s, Kind::W, c.backward_weight, "backward_weight");
  const size_t want = static_cast<size_t>(s.stages - 1);
  if (c.boundaries.size() != want) {
    fail(Status::invalid_argument, "config->nboundaries = %zu but the schedule has %d stages; expected S - 1 = %zu",
         c.boundaries.size(), s.stages, want);
  }
  for (size_t b = 0; b < c.boundaries.size(); ++b) {
    for (size_t d = 0; d < c.boundaries[b].shape.size(); ++d) {
      if (c.boundaries[b].shape[d] < 0) {
        fail(Status::invalid_argument, "config->boundaries[%zu].shape[%zu] = %lld; expected >= 0", b, d,
             static_cast<long long>(c.boundaries[b].shape[d]));
      }
    }
    if (c.boundaries[b].device != c.boundaries[0].device) {
      fail(Status::invalid_argument, "config->boundaries[%zu] is %s memory but boundaries[0] is %s memory; expected "
           "all boundaries in one kind of memory", b, c.boundaries[b].device ? "device" : "host",
           c.boundaries[0].device ? "device" : "host");
    }
  }
  const bool device = !c.boundaries.empty() && c.boundaries[0].device;
  if (device && gpu::device_id(comm) < 0) {
#ifdef WEFT_HAVE_CUDA
    fail(Status::unsupported, "config->boundaries are CUDA device memory, but %s has no GPU (no CUDA device was set "
         "up for it): use host boundaries", comm.describe().c_str());
#else
    fail(Status::unsupported, "config->boundaries are declared CUDA device memory (device_type WEFT_DEVICE_CUDA), "
         "but this weft was built without CUDA (WEFT_WITH_CUDA=OFF): use host boundaries");
#endif
  }
  if (!device && c.stream) {
    fail(Status::invalid_argument, "config->stream is set but the boundaries are host memory; a stream orders "
         "device transfers only (pass NULL)");
  }
}

// One word for the whole schedule (every rank's list), so that ranks can compare theirs.
uint64_t fingerprint(const Schedule& s) {
  uint64_t h = training::key_of({uint64_t(s.ranks), uint64_t(s.stages), uint64_t(s.microbatches)});
  for (const auto& list : s.actions) {
    h = training::key_of({h, list.size()});
    for (const Action& a : list) h = training::key_of({h, uint64_t(a.kind), uint64_t(uint32_t(a.stage)), uint64_t(uint32_t(a.microbatch))});
  }
  return h;
}

// Collective: every rank must run the same schedule with the same boundaries and the same
// record setting, or the step would pair messages of different sizes or wait in a gather that
// some ranks never join. Refused here with Status::mismatch naming what differs.
void check_ranks_agree(Comm& comm, const Schedule& s, const ExecutorConfig& c) {
  const uint64_t mine[3] = {fingerprint(s), c.boundaries.size(), c.record ? 1u : 0u};
  const size_t p = static_cast<size_t>(comm.size());
  std::vector<uint64_t> all(3 * p);
  coll::allgather(comm, mine, all.data(), 3, DType::u64);
  for (size_t r = 0; r < p; ++r) {
    if (all[3 * r] != mine[0]) {
      fail(Status::mismatch, "rank %zu passed another schedule than rank %d (its action lists differ); every rank "
           "must pass the same schedule", r, comm.rank());
    }
    if (all[3 * r + 2] != mine[2]) {
      fail(Status::mismatch, "rank %zu has config->record = %s but rank %d has %s; set it on all ranks or none", r,
           all[3 * r + 2] ? "on" : "off", comm.rank(), mine[2] ? "on" : "off");
    }
  }
  std::vector<uint64_t> keys;
  for (const Boundary& b : c.boundaries) {
    uint64_t k = training::key_of({uint64_t(b.dtype), uint64_t(b.device), b.shape.size()});
    for (int64_t d : b.shape) k = training::key_of({k, uint64_t(d)});
    keys.push_back(k);
  }
  training::check_agreement(comm, "pipeline", {keys.size()}, keys,
                            [](size_t i) { return format("config->boundaries[%zu]", i); });
}

}  // namespace

Executor::State::State(std::shared_ptr<Comm> c, std::shared_ptr<const Schedule> s, ExecutorConfig cfg)
    : comm(std::move(c)), schedule(std::move(s)), config(std::move(cfg)), pool(*comm, config.boundaries) {
  rank = comm->rank();
  device = !config.boundaries.empty() && config.boundaries[0].device;
  const std::vector<Action>& l = list();
  next_compute.assign(l.size(), l.size());
  size_t next = l.size();
  for (size_t k = l.size(); k-- > 0;) {
    next_compute[k] = next;
    if (is_compute(l[k].kind)) next = k;
    if (is_recv(l[k].kind)) recv_at[{int(l[k].kind), l[k].stage, l[k].microbatch}] = k;
  }
}

Executor::Executor(std::shared_ptr<Comm> comm, std::shared_ptr<const Schedule> schedule, ExecutorConfig config) {
  if (!comm || !schedule) fail(Status::invalid_argument, "pipeline executor: no communicator or no schedule");
  check_config(*comm, *schedule, config);
  Comm& c = *comm;
  training::run_on(comm, [&] { check_ranks_agree(c, *schedule, config); });
  state_ = std::make_unique<State>(std::move(comm), std::move(schedule), std::move(config));
}

Executor::~Executor() = default;

// ---------------------------------------------------------------- BufferPool

void* BufferPool::make(const BufferKey& key) {
  if (live_.count(key)) {
    fail(Status::internal, "pipeline buffer pool: %s of boundary %d, micro-batch %d made twice",
         key.kind == BufferKind::activation ? "activation" : "gradient", key.boundary, key.microbatch);
  }
  std::vector<std::shared_ptr<void>>& spare = free_[key.boundary];
  std::shared_ptr<void> buf;
  if (!spare.empty()) {
    buf = std::move(spare.back());
    spare.pop_back();
  } else {
    const Boundary& b = boundaries_[static_cast<size_t>(key.boundary)];
    // At least one byte, so that an empty boundary still has an address that names it.
    const size_t bytes = b.bytes() ? b.bytes() : 1;
    if (b.device) {
      buf = gpu::device_buffer(comm_, bytes);
    } else {
      void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (!p) fail(Status::out_of_memory, "pipeline buffer pool: %zu bytes for boundary %d", bytes, key.boundary);
      std::memset(p, 0, bytes);
      buf = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    }
  }
  void* p = buf.get();
  live_.emplace(key, std::move(buf));
  return p;
}

void* BufferPool::find(const BufferKey& key) const {
  auto it = live_.find(key);
  return it == live_.end() ? nullptr : it->second.get();
}

void BufferPool::release(const BufferKey& key) {
  auto it = live_.find(key);
  if (it == live_.end()) return;
  free_[key.boundary].push_back(std::move(it->second));
  live_.erase(it);
}

void BufferPool::park_all() {
  for (auto& [key, buf] : live_) parked_.push_back(std::move(buf));
  live_.clear();
}

}  // namespace weft::pipeline
