// The planner's cost model in one place (weft/plan.h states it in prose): what one stage of a
// layout costs per micro-batch (compute, the collectives inside it, its bytes, its activations)
// and per step (its parameters' memory and data-parallel reduction). The pipeline simulator
// then turns the stages into a makespan; evaluate() puts the two together.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/pipeline/schedule.h"
#include "core/pipeline/simulator.h"
#include "core/plan/plan.h"

namespace weft::plan {

// A message of b bytes over a link costs latency + b / bandwidth. A host's link may also carry
// the cluster's measured collectives, which then set the collectives' latency terms.
struct Link {
  double latency = 0, bandwidth = 0;
  const std::vector<MeasuredCollective>* measured = nullptr;
  double time(double bytes) const { return latency + bytes / bandwidth; }
};

// The latency term of a collective of `kind` over n ranks that takes `steps` ring steps: steps x
// the link's latency, or from the link's measured collectives of that kind (weft/plan.h: the
// entry for n, else the per-step cost of the nearest smaller size, else of the nearest larger).
double latency_term(const Link& l, Collective kind, int n, double steps);

// The link a group of ranks uses: ranks are numbered tp innermost, then cp, dp, pp, so a group
// whose members lie within `span` consecutive ranks stays in one host when span divides
// ranks_per_host (the blocks never straddle a host boundary); otherwise it crosses hosts.
Link link_for(const Cluster& c, long long span);

// Ring collectives over n ranks of `bytes` (the whole buffer): time and bytes one rank sends.
struct Cost {
  double seconds = 0, bytes = 0;
  Cost& operator+=(const Cost& o) {
    seconds += o.seconds;
    bytes += o.bytes;
    return *this;
  }
};
Cost ring_allreduce(int n, double bytes, const Link& l);      // 2(n-1)/n bytes, 2(n-1) latencies
Cost ring_allgather(int n, double bytes, const Link& l);      // (n-1)/n bytes, n-1 latencies (half an all-reduce's)
Cost reduce_scatter(int n, double bytes, const Link& l);      // as all-gather
Cost all_to_all(int n, double bytes_out, const Link& l);      // (n-1)/n of bytes_out, n-1 all-to-all latencies

// Per stage (one entry each) of a layout with S stages and micro-batches of `mbs` samples.
struct StagePrices {
  pipeline::Costs costs;              // what the simulator gets (F and B include the collectives)
  std::vector<double> compute;        // arithmetic of F + B of one micro-batch
  std::vector<double> comm_seconds;   // collectives inside F + B of one micro-batch
  std::vector<double> comm_bytes;     // bytes sent per micro-batch (collectives + boundary)
  std::vector<double> static_bytes;   // weights + gradients + optimizer state (ZeRO-sharded)
  std::vector<double> gathered_bytes; // ZeRO-3: the stage's whole weights while it runs
  std::vector<double> dp_seconds;     // the step's data-parallel reduction of its gradients
  std::vector<double> dp_bytes;
};

class Pricer {
 public:
  explicit Pricer(const Options& o);  // o must be checked()
  int layers() const { return static_cast<int>(copies_.size()); }
  // shape: dp, tp, pp, cp, ep, zero of the layout.
  StagePrices stages(const Layout& shape, int stages, int mbs) const;
  // Where the S stages start: S + 1 indices into the layer copies, contiguous, none empty,
  // chosen so that the slowest stage's compute is as small as it can be (Megatron places the
  // embedding and the head with fewer blocks for that reason; an even split by count would make
  // the stage with the head the pipeline's bottleneck). Cached per (S, tp, cp).
  const std::vector<size_t>& bounds(int stages, const Layout& shape) const;
  // Fills the prediction fields of *out from a simulation of `schedule` (validated by the
  // caller; the shape and schedule fields of *out already set; m = schedule->microbatches).
  // ZeRO 0, 1 and 2 time the pipeline alike, so a caller pricing several stages passes the
  // timeline of one of them as `reuse` (NULL = simulate); the timeline used is returned.
  std::shared_ptr<const pipeline::Timeline> evaluate(std::shared_ptr<const pipeline::Schedule> schedule, int mbs,
                                                     Layout* out,
                                                     std::shared_ptr<const pipeline::Timeline> reuse = nullptr) const;

 private:
  const Options& o_;
  std::vector<int> copies_;  // the layer kind of each layer copy, in model order
  mutable std::map<std::tuple<int, int, int>, std::vector<size_t>> bounds_;
};

}  // namespace weft::plan
