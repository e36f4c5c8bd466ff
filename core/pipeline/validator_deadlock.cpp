// The 'no deadlock' rule of weft_schedule_validate, and the message pairing it shares with the
// 'transfers' rule.
//
// The model is the strictest blocking one (NCCL's grouped send/recv): a rank reaching a run of
// consecutive SEND/RECV actions (an exchange) posts all of them at once and cannot go on until
// every one of them has met its partner, i.e. until the partner action has been posted by its
// rank (it may be waiting in the partner's current exchange or that exchange may already have
// completed). Compute actions never block. A schedule that runs to the end under this model runs
// under any more forgiving transport too.
#include <algorithm>
#include <map>

#include "core/common/status.h"
#include "core/pipeline/validator_internal.h"

namespace weft::pipeline::detail {

void broken(const Schedule& s, int rank, size_t index, const char* rule, const std::string& why) {
  const std::string text = to_string(s.actions[static_cast<size_t>(rank)][index]);
  fail(Status::invalid_argument, "rank %d, action %zu (%s): rule '%s': %s", rank, index, text.c_str(), rule,
       why.c_str());
}

int peer_of(const Schedule& s, const Action& a) {
  int st = -1;
  if (a.kind == Kind::SEND_F || a.kind == Kind::RECV_B) st = a.stage + 1;
  if (a.kind == Kind::RECV_F || a.kind == Kind::SEND_B) st = a.stage - 1;
  if (st < 0 || st >= s.stages) return -1;
  return s.stage_rank[static_cast<size_t>(st)];
}

Partners pair_messages(const Schedule& s) {
  Partners partners(s.actions.size());
  // sends[a][b]: indices of rank a's sends to b in list order; recvs[b][a]: b's receives from a.
  std::vector<std::map<int, std::vector<int>>> sends(s.actions.size()), recvs(s.actions.size());
  for (size_t r = 0; r < s.actions.size(); ++r) {
    partners[r].assign(s.actions[r].size(), Place{});
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action& a = s.actions[r][k];
      if (!is_comm(a.kind)) continue;
      const int peer = peer_of(s, a);
      if (peer < 0) continue;
      (is_send(a.kind) ? sends : recvs)[r][peer].push_back(static_cast<int>(k));
    }
  }
  for (size_t a = 0; a < s.actions.size(); ++a) {
    for (const auto& [b, out] : sends[a]) {
      const std::vector<int>& in = recvs[static_cast<size_t>(b)][static_cast<int>(a)];
      for (size_t k = 0; k < out.size() && k < in.size(); ++k) {
        partners[a][static_cast<size_t>(out[k])] = Place{b, in[k]};
        partners[static_cast<size_t>(b)][static_cast<size_t>(in[k])] = Place{static_cast<int>(a), out[k]};
      }
    }
  }
  return partners;
}

namespace {

// One past the exchange that starts at `k` (a maximal run of SEND/RECV actions).
size_t exchange_end(const std::vector<Action>& list, size_t k) {
  while (k < list.size() && is_comm(list[k].kind)) ++k;
  return k;
}

}  // namespace

void check_deadlock(const Schedule& s, const Partners& partners) {
  const size_t p = s.actions.size();
  std::vector<size_t> at(p, 0);           // each rank's next action
  std::vector<size_t> posted_to(p, 0);    // actions [0, posted_to) have been posted or done
  auto posted = [&](const Place& q) { return static_cast<size_t>(q.index) < posted_to[static_cast<size_t>(q.rank)]; };

  // Rounds until nothing moves: each round lets every rank run as far as it can. A rank that is
  // blocked costs one look at its current exchange per round, so the whole check stays linear in
  // the actions times the (small) number of rounds.
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < p; ++r) {
      const std::vector<Action>& list = s.actions[r];
      while (at[r] < list.size()) {
        if (!is_comm(list[at[r]].kind)) {
          ++at[r];
          posted_to[r] = std::max(posted_to[r], at[r]);
          moved = true;
          continue;
        }
        const size_t end = exchange_end(list, at[r]);
        if (posted_to[r] < end) {
          posted_to[r] = end;
          moved = true;
        }
        bool done = true;
        for (size_t k = at[r]; k < end && done; ++k) done = posted(partners[r][k]);
        if (!done) break;
        at[r] = end;
      }
    }
  }

  std::string why;
  int first_rank = -1;
  size_t first_index = 0;
  for (size_t r = 0; r < p; ++r) {
    if (at[r] >= s.actions[r].size()) continue;
    const size_t end = exchange_end(s.actions[r], at[r]);
    size_t k = at[r];
    while (k < end && posted(partners[r][k])) ++k;
    const Place& q = partners[r][k];
    const std::string wait = format("rank %d's action %d (%s), which rank %d never posts",
                                    q.rank, q.index, to_string(s.actions[static_cast<size_t>(q.rank)][static_cast<size_t>(q.index)]).c_str(),
                                    q.rank);
    if (first_rank < 0) {
      first_rank = static_cast<int>(r);
      first_index = k;
      why = std::string("the exchange it is in waits for ").append(wait);
    } else {
      why.append(format("; rank %zu, action %zu (%s) waits for ", r, k, to_string(s.actions[r][k]).c_str()))
          .append(wait);
    }
  }
  if (first_rank >= 0) broken(s, first_rank, first_index, "no deadlock", why);
}

}  // namespace weft::pipeline::detail
