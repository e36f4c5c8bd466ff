// The simulator (weft_pipeline_costs_t in weft/pipeline.h states the model), which is the
// host executor's behaviour: every rank runs its list in order; SEND and RECV actions cost the
// rank nothing (the executor posts receives ahead and sends complete in the background); a
// message arrives latency + bytes / bandwidth after its SEND was reached; a compute action starts
// when the rank is free and, if its input comes from another rank, when that message has arrived.
// The order of the SEND/RECV actions matters for deadlock freedom (the validator's business) but
// not for time here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/common/status.h"
#include "core/pipeline/simulator.h"
#include "core/plugin/registry.h"

namespace weft::pipeline {

Costs uniform_costs(int stages, double f, double b) {
  Costs c;
  const size_t n = static_cast<size_t>(std::max(stages, 0));
  c.forward.assign(n, f);
  c.backward.assign(n, b);
  c.backward_input.assign(n, b / 2);
  c.backward_weight.assign(n, b / 2);
  c.activation_bytes.assign(n, 0);
  c.weight_grad_bytes.assign(n, 0);
  c.boundary_bytes.assign(n, 0);
  c.reduce_grad.assign(n, 0);
  return c;
}

namespace {

void check_array(const std::vector<double>& v, size_t stages, const char* name) {
  if (v.size() != stages) {
    fail(Status::invalid_argument, "costs: %s has %zu entries; the schedule has %zu stages", name, v.size(), stages);
  }
  for (size_t s = 0; s < v.size(); ++s) {
    if (!(v[s] >= 0) || !std::isfinite(v[s])) {
      fail(Status::invalid_argument, "costs: %s[%zu] = %g; expected a finite value >= 0", name, s, v[s]);
    }
  }
}

void check_costs(const Costs& c, size_t stages) {
  if (!c.model) {  // a cost model's times are checked as they come (compute_time)
    check_array(c.forward, stages, "forward");
    check_array(c.backward, stages, "backward");
    check_array(c.backward_input, stages, "backward_input");
    check_array(c.backward_weight, stages, "backward_weight");
    check_array(c.reduce_grad, stages, "reduce_grad");
  } else if (c.microbatch_size < 1) {
    fail(Status::invalid_argument, "costs: microbatch_size = %d; expected >= 1 for %s", c.microbatch_size,
         c.model->origin.describe("cost model").c_str());
  }
  check_array(c.activation_bytes, stages, "activation_bytes");
  check_array(c.weight_grad_bytes, stages, "weight_grad_bytes");
  check_array(c.boundary_bytes, stages, "boundary_bytes");
  for (size_t s = 0; s < stages; ++s) {
    if (c.weight_grad_bytes[s] > c.activation_bytes[s]) {
      fail(Status::invalid_argument, "costs: weight_grad_bytes[%zu] = %g exceeds activation_bytes[%zu] = %g", s,
           c.weight_grad_bytes[s], s, c.activation_bytes[s]);
    }
  }
  const double scalars[] = {c.latency, c.bandwidth, c.overhead};
  const char* names[] = {"latency", "bandwidth", "overhead"};
  for (int k = 0; k < 3; ++k) {
    if (!(scalars[k] >= 0) || !std::isfinite(scalars[k])) {
      fail(Status::invalid_argument, "costs: %s = %g; expected a finite value >= 0", names[k], scalars[k]);
    }
  }
}

// Arrival times of messages, by direction and the receiving (stage, micro-batch); NaN = not sent.
class Mailbox {
 public:
  Mailbox(int stages, int microbatches)
      : mbs_(static_cast<size_t>(microbatches)),
        arrival_(2 * static_cast<size_t>(stages) * mbs_, std::numeric_limits<double>::quiet_NaN()) {}
  // The receiver's key of a SEND or RECV action.
  double& at(const Action& a) {
    const bool forward = a.kind == Kind::SEND_F || a.kind == Kind::RECV_F;
    int stage = a.stage;
    if (a.kind == Kind::SEND_F) stage += 1;
    if (a.kind == Kind::SEND_B) stage -= 1;
    const size_t stages = arrival_.size() / (2 * mbs_);
    return arrival_[(forward ? 0 : stages) * mbs_ + static_cast<size_t>(stage) * mbs_ + static_cast<size_t>(a.microbatch)];
  }

 private:
  size_t mbs_;
  std::vector<double> arrival_;
};

// Index of the (direction, stage, micro-batch) a receive delivers or a compute action needs.
size_t recv_key(const Schedule& s, bool forward, const Action& a) {
  return ((forward ? 0 : static_cast<size_t>(s.stages)) + static_cast<size_t>(a.stage)) *
             static_cast<size_t>(s.microbatches) + static_cast<size_t>(a.microbatch);
}

double message_time(const Action& a, const Costs& c) {
  // SEND_F(s) carries stage s's output; SEND_B(s) the gradient of stage s's input = stage s-1's output.
  const size_t boundary = static_cast<size_t>(a.kind == Kind::SEND_F ? a.stage : a.stage - 1);
  const double bytes = c.boundary_bytes[boundary];
  return c.latency + (c.bandwidth > 0 ? bytes / c.bandwidth : 0.0);
}

// The plugin's time of compute action k of rank r, checked.
double model_time(const Action& a, const Costs& c, int stages, size_t r, size_t k) {
  const double t = c.model->cost(static_cast<int32_t>(a.kind), a.stage, stages, a.microbatch, c.microbatch_size);
  if (!(t >= 0) || !std::isfinite(t)) {
    fail(Status::invalid_argument,
         "simulate: %s gave %g for rank %zu, action %zu (%s; %d stages, micro-batch size %d); expected a finite time "
         ">= 0",
         c.model->origin.describe("cost model").c_str(), t, r, k, to_string(a).c_str(), stages, c.microbatch_size);
  }
  return t + c.overhead;
}

double compute_time(const Action& a, const Costs& c, int stages, size_t r, size_t k) {
  if (c.model) return model_time(a, c, stages, r, k);
  const size_t s = static_cast<size_t>(a.stage);
  switch (a.kind) {
    case Kind::F: return c.forward[s] + c.overhead;
    case Kind::B: return c.backward[s] + c.overhead;
    case Kind::I: return c.backward_input[s] + c.overhead;
    case Kind::W: return c.backward_weight[s] + c.overhead;
    default: return c.reduce_grad[s] + c.overhead;  // REDUCE_GRAD
  }
}

// Activations held by one rank, walked in list order (the rank's time order).
struct Memory {
  int count = 0;
  double bytes = 0;
  RankStats* stats;
  void apply(const Action& a, const Costs& c) {
    const size_t s = static_cast<size_t>(a.stage);
    switch (a.kind) {
      case Kind::F:
        count += 1;
        bytes += c.activation_bytes[s];
        stats->peak_activations = std::max(stats->peak_activations, count);
        stats->peak_activation_bytes = std::max(stats->peak_activation_bytes, bytes);
        break;
      case Kind::B:
        count -= 1;
        bytes -= c.activation_bytes[s];
        break;
      case Kind::I:  // only what W needs stays; the micro-batch still counts until W
        bytes -= c.activation_bytes[s] - c.weight_grad_bytes[s];
        break;
      case Kind::W:
        count -= 1;
        bytes -= c.weight_grad_bytes[s];
        break;
      default: break;
    }
  }
};

}  // namespace

Timeline simulate(std::shared_ptr<const Schedule> sp, const Costs& costs, bool prevalidated) {
  if (!sp) fail(Status::invalid_argument, "simulate: no schedule");
  const Schedule& s = *sp;
  if (!prevalidated) validate(s);
  check_costs(costs, static_cast<size_t>(s.stages));

  const size_t p = s.actions.size();
  Timeline t;
  t.schedule = sp;
  t.simulated = true;
  t.start.resize(p);
  t.end.resize(p);
  t.stats.assign(p, RankStats{});
  for (size_t r = 0; r < p; ++r) {
    t.start[r].assign(s.actions[r].size(), 0.0);
    t.end[r].assign(s.actions[r].size(), 0.0);
  }
  Mailbox mail(s.stages, s.microbatches);
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0.0);
  std::vector<std::vector<size_t>> pending(p);  // receives whose end is filled in at the end
  std::vector<Memory> memory(p);
  for (size_t r = 0; r < p; ++r) memory[r].stats = &t.stats[r];
  // The receive on rank r that brings compute action k its input (the validator guarantees it
  // comes earlier in r's list), or nullptr when the input is made on r itself or needs none.
  std::vector<std::vector<int>> recv_at(p);
  for (size_t r = 0; r < p; ++r) {
    recv_at[r].assign(2 * static_cast<size_t>(s.stages) * static_cast<size_t>(s.microbatches), -1);
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action& a = s.actions[r][k];
      if (is_recv(a.kind)) recv_at[r][recv_key(s, a.kind == Kind::RECV_F, a)] = static_cast<int>(k);
    }
  }
  auto input_recv = [&](size_t r, size_t k) -> const Action* {
    const Action& a = s.actions[r][k];
    if (a.kind != Kind::F && a.kind != Kind::B && a.kind != Kind::I) return nullptr;
    const int at = recv_at[r][recv_key(s, a.kind == Kind::F, a)];
    return at < 0 ? nullptr : &s.actions[r][static_cast<size_t>(at)];
  };

  // Sweeps over the ranks, each running until a compute action needs a message not yet sent; a
  // validated schedule always makes progress, so a sweep without any is an internal error.
  for (;;) {
    bool progress = false, finished = true;
    for (size_t r = 0; r < p; ++r) {
      const auto& list = s.actions[r];
      while (next[r] < list.size()) {
        const size_t k = next[r];
        const Action& a = list[k];
        if (is_send(a.kind)) {
          t.start[r][k] = free_at[r];
          t.end[r][k] = mail.at(a) = free_at[r] + message_time(a, costs);
        } else if (is_recv(a.kind)) {
          t.start[r][k] = free_at[r];  // posted now; its end is the arrival, filled in below
          pending[r].push_back(k);
        } else {
          double ready = free_at[r];
          if (const Action* in = input_recv(r, k)) {
            const double arrive = mail.at(*in);
            if (std::isnan(arrive)) break;  // its sender has not got there yet
            ready = std::max(ready, arrive);
          }
          t.start[r][k] = ready;
          free_at[r] = ready + compute_time(a, costs, s.stages, r, k);
          t.end[r][k] = free_at[r];
          memory[r].apply(a, costs);
        }
        ++next[r];
        progress = true;
      }
      if (next[r] < list.size()) finished = false;
    }
    if (finished) break;
    if (!progress) {
      std::string waiting;
      for (size_t r = 0; r < p; ++r) {
        if (next[r] >= s.actions[r].size()) continue;
        waiting += format("%srank %zu action %zu (%s)", waiting.empty() ? "" : ", ", r, next[r],
                          to_string(s.actions[r][next[r]]).c_str());
      }
      fail(Status::internal, "simulate: no rank can go on although the schedule validated; waiting: %s",
           waiting.c_str());
    }
  }
  // A receive completes when its message arrives, or when it was posted if that was later.
  for (size_t r = 0; r < p; ++r) {
    for (size_t k : pending[r]) t.end[r][k] = std::max(t.start[r][k], mail.at(s.actions[r][k]));
  }
  t.compute_busy_idle();
  return t;
}

}  // namespace weft::pipeline
