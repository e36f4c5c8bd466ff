// Lowering a compute order to one with communication: every compute action that needs data from
// another rank gets a RECV right before it, every one whose result another rank needs gets a SEND
// right after it. Because a SEND after compute X and a RECV before the next compute Y end up
// adjacent, they form one exchange (posted together, Megatron's send_forward_recv_backward):
// that is what keeps 1F1B's steady state free of deadlock under blocking transfers.
#include <cstddef>

#include "core/pipeline/schedule.h"

namespace weft::pipeline {

namespace {

// The rank holding stage `st`, or -1 for a stage outside the schedule or on no rank.
int rank_of(const Schedule& s, int st) {
  if (st < 0 || st >= static_cast<int>(s.stage_rank.size())) return -1;
  return s.stage_rank[static_cast<size_t>(st)];
}

// A transfer is needed when the neighbouring stage exists, has a rank, and that rank is not ours.
bool remote(const Schedule& s, int neighbour, int rank) {
  const int q = rank_of(s, neighbour);
  return q >= 0 && q != rank;
}

}  // namespace

void add_communication(Schedule& s) {
  for (size_t r = 0; r < s.actions.size(); ++r) {
    const int rank = static_cast<int>(r);
    const std::vector<Action>& in = s.actions[r];
    std::vector<Action> out;
    out.reserve(in.size() * 2);
    for (const Action& a : in) {
      // Existing SEND/RECV actions are dropped: the result is a function of the compute order
      // alone, so lowering twice gives the same lists.
      if (is_comm(a.kind)) continue;
      const bool backward = a.kind == Kind::B || a.kind == Kind::I;
      if (a.kind == Kind::F && remote(s, a.stage - 1, rank)) out.push_back({Kind::RECV_F, a.stage, a.microbatch});
      if (backward && remote(s, a.stage + 1, rank)) out.push_back({Kind::RECV_B, a.stage, a.microbatch});
      out.push_back(a);
      if (a.kind == Kind::F && remote(s, a.stage + 1, rank)) out.push_back({Kind::SEND_F, a.stage, a.microbatch});
      if (backward && remote(s, a.stage - 1, rank)) out.push_back({Kind::SEND_B, a.stage, a.microbatch});
    }
    s.actions[r] = std::move(out);
  }
}

}  // namespace weft::pipeline
