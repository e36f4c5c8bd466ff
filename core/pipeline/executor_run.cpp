// One step of the executor (weft_pipeline_run): walks this rank's list, calls the stage
// callbacks with buffers from the pool, and moves activations and gradients between ranks.
//
// Host boundaries: every SEND/RECV is its own transport operation. Receives are posted one
// compute action early (when compute k starts, every receive before the compute after k), so
// they overlap compute k; sends are posted where the list has them and finish in the background.
// Posting receives and sends each in list order keeps the per-direction message order the
// validator checked, and as no post ever blocks, the compute order alone decides progress.
// Device boundaries: each exchange (a run of consecutive SEND/RECV actions) is one device
// point-to-point batch at its place in the list, stream-ordered on config.stream. Posting a
// receive early there would queue it on the stream ahead of the compute before it, and a stream
// runs in order, so the early receive could wait for data that compute has yet to make.
#include <algorithm>
#include <chrono>

#include "core/collectives/collectives.h"
#include "core/comm/progress.h"
#include "core/comm/user_p2p.h"
#include "core/common/status.h"
#include "core/device/device_api.h"
#include "core/pipeline/executor_state.h"
#include "core/training/reduction.h"

namespace weft::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

class Step {
 public:
  explicit Step(Executor::State& st)
      : st_(st), comm_(*st.comm), list_(st.list()), start_(list_.size(), 0.0), end_(list_.size(), 0.0),
        ops_(list_.size()) {}

  Timeline run();

 private:
  double now() const { return std::chrono::duration<double>(Clock::now() - origin_).count(); }
  std::string where(size_t k) const {
    return format("rank %d, action %zu (%s)", st_.rank, k, to_string(list_[k]).c_str());
  }
  // The buffer a SEND/RECV moves, and the peer.
  BufferKey transfer_key(const Action& a) const;
  int peer_of(const Action& a) const;
  void* transfer_buffer(const Action& a);

  // Host path.
  void post_host(size_t k);
  void post_receives_before(size_t limit);
  void finish_host(size_t k);  // waits for action k's operation (deadline, named error)
  void poll();
  void wait_receive(Kind kind, int stage, int microbatch);
  // Device path.
  void device_exchange(size_t first, size_t last);

  void compute(size_t k);
  void abandon();
  Timeline gather();

  Executor::State& st_;
  Comm& comm_;
  const std::vector<Action>& list_;
  Clock::time_point origin_;
  std::vector<double> start_, end_;
  int held_ = 0, peak_ = 0;
  std::vector<std::unique_ptr<transport::Op>> ops_;  // per SEND/RECV action, once posted
  std::vector<size_t> in_flight_;                    // posted host operations not seen finished
  size_t receives_posted_to_ = 0;                    // receives before this index are posted
};

BufferKey Step::transfer_key(const Action& a) const {
  switch (a.kind) {
    case Kind::SEND_F: return {BufferKind::activation, a.stage, a.microbatch};
    case Kind::RECV_F: return {BufferKind::activation, a.stage - 1, a.microbatch};
    case Kind::SEND_B: return {BufferKind::gradient, a.stage - 1, a.microbatch};
    default: return {BufferKind::gradient, a.stage, a.microbatch};  // RECV_B
  }
}

int Step::peer_of(const Action& a) const {
  const bool up = a.kind == Kind::SEND_F || a.kind == Kind::RECV_B;  // the peer holds stage + 1
  return st_.schedule->stage_rank[static_cast<size_t>(a.stage + (up ? 1 : -1))];
}

void* Step::transfer_buffer(const Action& a) {
  const BufferKey key = transfer_key(a);
  if (is_recv(a.kind)) return st_.pool.make(key);
  void* p = st_.pool.find(key);
  if (!p) fail(Status::internal, "pipeline: nothing to send for %s", to_string(a).c_str());
  return p;
}

void Step::post_host(size_t k) {
  const Action& a = list_[k];
  const size_t bytes = st_.config.boundaries[static_cast<size_t>(transfer_key(a).boundary)].bytes();
  void* buf = transfer_buffer(a);
  ops_[k] = std::make_unique<transport::Op>();
  start_[k] = now();
  try {
    post_user_p2p(comm_, *ops_[k], is_send(a.kind), peer_of(a), buf, bytes);
  } catch (const Error& e) {
    throw Error(e.status(), where(k) + ": " + e.message());
  }
  in_flight_.push_back(k);
}

void Step::post_receives_before(size_t limit) {
  for (; receives_posted_to_ < limit; ++receives_posted_to_)
    if (is_recv(list_[receives_posted_to_].kind)) post_host(receives_posted_to_);
}

void Step::finish_host(size_t k) {
  transport::Op* op = ops_[k].get();
  if (!op) fail(Status::internal, "%s: waited for before it was posted", where(k).c_str());
  try {
    wait_ops(comm_, {op}, {is_send(list_[k].kind) ? "pipeline send" : "pipeline receive", "", 0});
  } catch (const Error& e) {
    throw Error(e.status(), where(k) + ": " + e.message());
  }
  end_[k] = now();
  std::erase(in_flight_, k);
  // A sent buffer is no longer needed (the receiving stage is on another rank).
  if (is_send(list_[k].kind)) st_.pool.release(transfer_key(list_[k]));
}

void Step::poll() {
  if (in_flight_.empty()) return;
  comm_.world().transport().progress();
  const std::vector<size_t> now_in_flight = in_flight_;
  for (size_t k : now_in_flight)
    if (ops_[k]->finished()) finish_host(k);  // checks the outcome; does not block
}

void Step::wait_receive(Kind kind, int stage, int microbatch) {
  auto it = st_.recv_at.find({int(kind), stage, microbatch});
  if (it == st_.recv_at.end()) {
    fail(Status::internal, "pipeline: rank %d has no %s of stage %d, micro-batch %d", st_.rank, kind_name(kind), stage,
         microbatch);
  }
  const size_t k = it->second;
  if (std::find(in_flight_.begin(), in_flight_.end(), k) != in_flight_.end()) finish_host(k);
}

void Step::device_exchange(size_t first, size_t last) {
  std::vector<gpu::P2POp> ops;
  std::vector<BufferKey> sent;
  for (size_t k = first; k < last; ++k) {
    const Action& a = list_[k];
    const BufferKey key = transfer_key(a);
    ops.push_back({is_send(a.kind), transfer_buffer(a), st_.config.boundaries[size_t(key.boundary)].bytes(), peer_of(a)});
    if (is_send(a.kind)) sent.push_back(key);
    start_[k] = now();
  }
  try {
    gpu::p2p(st_.comm, "pipeline exchange", ops, st_.config.stream, false);
  } catch (const Error& e) {
    throw Error(e.status(), where(first) + ": " + e.message());
  }
  // Done, or queued on the stream ahead of everything that could reuse the sent buffers.
  for (const BufferKey& key : sent) st_.pool.release(key);
  const double t = now();
  for (size_t k = first; k < last; ++k) end_[k] = t;
}

void Step::compute(size_t k) {
  const Action& a = list_[k];
  const int S = st_.schedule->stages;
  const ExecutorConfig& c = st_.config;
  StageCall call{a.kind, a.stage, a.microbatch, {}, {}};
  const StageFn* fn = nullptr;
  const char* what = "";
  auto view = [&](const BufferKey& key) {
    return StageBuffer{st_.pool.find(key), &c.boundaries[static_cast<size_t>(key.boundary)]};
  };
  switch (a.kind) {
    case Kind::F:
      fn = &c.forward, what = "forward";
      if (a.stage > 0) {
        if (!st_.local(a.stage - 1) && !st_.device) wait_receive(Kind::RECV_F, a.stage, a.microbatch);
        call.input = view({BufferKind::activation, a.stage - 1, a.microbatch});
      }
      if (a.stage < S - 1) {
        st_.pool.make({BufferKind::activation, a.stage, a.microbatch});
        call.output = view({BufferKind::activation, a.stage, a.microbatch});
      }
      break;
    case Kind::B:
    case Kind::I:
      fn = a.kind == Kind::B ? &c.backward : &c.backward_input;
      what = a.kind == Kind::B ? "backward" : "backward_input";
      if (a.stage < S - 1) {
        if (!st_.local(a.stage + 1) && !st_.device) wait_receive(Kind::RECV_B, a.stage, a.microbatch);
        call.input = view({BufferKind::gradient, a.stage, a.microbatch});
      }
      if (a.stage > 0) {
        st_.pool.make({BufferKind::gradient, a.stage - 1, a.microbatch});
        call.output = view({BufferKind::gradient, a.stage - 1, a.microbatch});
      }
      break;
    case Kind::W: fn = &c.backward_weight, what = "backward_weight"; break;
    default: fn = &c.reduce_grad, what = "reduce_grad"; break;
  }
  if ((call.input.boundary && !call.input.data) || (call.output.boundary && !call.output.data)) {
    fail(Status::internal, "%s: a boundary buffer is missing", where(k).c_str());
  }
  start_[k] = now();
  if (*fn) {
    try {
      (*fn)(call);
    } catch (const Error& e) {
      throw Error(e.status(), where(k) + ": " + e.message());
    } catch (const std::exception& e) {
      throw Error(Status::internal, format("%s: %s callback threw: %s", where(k).c_str(), what, e.what()));
    }
  }
  end_[k] = now();
  if (a.kind == Kind::F) {
    peak_ = std::max(peak_, ++held_);
  } else if (a.kind == Kind::B || a.kind == Kind::I) {
    --held_;
    // The F input and the output gradient of (stage, micro-batch) are used up.
    if (a.stage > 0) st_.pool.release({BufferKind::activation, a.stage - 1, a.microbatch});
    if (a.stage < S - 1) st_.pool.release({BufferKind::gradient, a.stage, a.microbatch});
  }
}

// After a failure: cancel what can be cancelled (a posted receive would otherwise take a later
// step's message), park the rest with the world and the buffers with the pool, and break the
// communicator: its message stream is out of step.
void Step::abandon() {
  transport::Transport& t = comm_.world().transport();
  for (auto& op : ops_) {
    if (op && !op->finished() && op->is_recv) t.cancel(*op);
  }
  for (auto& op : ops_) {
    if (op && !op->finished()) comm_.world().bury(std::move(op));
  }
  st_.pool.park_all();
}

Timeline Step::gather() {
  Timeline t;
  t.schedule = st_.schedule;
  t.simulated = false;
  const int p = comm_.size();
  // Per rank: its start times, end times, peak, and its origin on the steady clock.
  std::vector<size_t> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p));
  size_t total = 0;
  for (int r = 0; r < p; ++r) {
    counts[size_t(r)] = 2 * st_.schedule->actions[size_t(r)].size() + 2;
    displs[size_t(r)] = total;
    total += counts[size_t(r)];
  }
  std::vector<double> mine(start_);
  mine.insert(mine.end(), end_.begin(), end_.end());
  mine.push_back(double(peak_));
  mine.push_back(std::chrono::duration<double>(origin_.time_since_epoch()).count());
  std::vector<double> all(total);
  training::run_on(st_.comm, [&] {
    coll::allgatherv(comm_, mine.data(), mine.size(), all.data(), counts, displs, DType::f64);
  });
  // Ranks on one host read one steady clock: their times go to the earliest origin, which
  // removes the ranks' spread in leaving the barrier. Across hosts the barrier's exit is the
  // common origin.
  const bool one_host = comm_.local_size() == p;
  double base = 0;
  if (one_host) {
    base = all[displs[0] + counts[0] - 1];
    for (int r = 1; r < p; ++r) base = std::min(base, all[displs[size_t(r)] + counts[size_t(r)] - 1]);
  }
  t.start.resize(size_t(p));
  t.end.resize(size_t(p));
  t.stats.resize(size_t(p));
  for (int r = 0; r < p; ++r) {
    const size_t n = st_.schedule->actions[size_t(r)].size();
    const double* at = all.data() + displs[size_t(r)];
    const double shift = one_host ? at[2 * n + 1] - base : 0.0;
    t.start[size_t(r)].resize(n);
    t.end[size_t(r)].resize(n);
    for (size_t k = 0; k < n; ++k) {
      t.start[size_t(r)][k] = at[k] + shift;
      t.end[size_t(r)][k] = at[n + k] + shift;
    }
    t.stats[size_t(r)].peak_activations = int(at[2 * n]);
  }
  t.compute_busy_idle();
  return t;
}

Timeline Step::run() {
  comm_.throw_if_unusable();
  // Leaving a barrier together gives the ranks one origin (gather() refines it on one host).
  if (st_.config.record) training::run_on(st_.comm, [this] { coll::barrier(comm_); });
  origin_ = Clock::now();
  try {
    for (size_t k = 0; k < list_.size();) {
      if (is_compute(list_[k].kind)) {
        if (!st_.device) post_receives_before(st_.next_compute[k]);
        compute(k);
        if (!st_.device) poll();
        ++k;
        continue;
      }
      size_t last = k;
      while (last < list_.size() && is_comm(list_[last].kind)) ++last;
      if (st_.device) {
        device_exchange(k, last);
      } else {
        post_receives_before(last);
        for (size_t j = k; j < last; ++j)
          if (is_send(list_[j].kind)) post_host(j);
        poll();
      }
      k = last;
    }
    while (!in_flight_.empty()) finish_host(in_flight_.front());
    // Every buffer's last user has run: a live one is a bookkeeping bug of this file.
    if (st_.pool.live()) fail(Status::internal, "pipeline: rank %d ended a step with %zu boundary buffers still held",
                              st_.rank, st_.pool.live());
  } catch (const Error& e) {
    abandon();
    comm_.mark_broken(e);
    throw;
  } catch (...) {
    abandon();
    throw;
  }
  return st_.config.record ? gather() : Timeline{};
}

}  // namespace

Timeline Executor::run() {
  Step step(*state_);
  return step.run();
}

}  // namespace weft::pipeline
