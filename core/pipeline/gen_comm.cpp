// Communication for generated orders that lowering.cpp's placement (a RECV right before the
// compute that needs it) cannot serve: with several stages per rank (interleaved 1F1B, the V
// placements) two ranks send both ways, and a receive posted only when needed can leave both
// ranks blocked in a send (the validator's strict model), or make messages between two ranks
// arrive in another order than they are received.
//
// The remedy orders every rank's SEND/RECV actions by one global key, the time the message is
// sent in a unit-cost run of the compute order (F = I = W = 1, B = 2; ties by sender rank and
// position): a SEND right after its compute, a RECV as late as the order allows (before the
// compute that needs it and before the rank's next message by key). Every rank's messages then
// follow the global key, so the first message not yet matched always has both its sides posted
// (each exchange before it holds only earlier messages): no deadlock, and the k-th message from
// a to b is the k-th b receives from a. A placement exists: the unit-cost run itself gives one
// (each RECV before the first compute that starts after its send), and the backward pass below
// finds the latest.
#include <algorithm>
#include <tuple>

#include "core/common/status.h"
#include "core/pipeline/gen_lists.h"

namespace weft::pipeline::gen {

namespace {

double unit_cost(Kind k) { return k == Kind::B ? 2.0 : 1.0; }

struct Message {
  double key;  // send time in the unit-cost run
  int sender;
  size_t index;  // the producing compute's index in the sender's list
  Action send, recv;
  int receiver;
};

}  // namespace

void place_communication_by_time(Schedule& s) {
  const size_t p = s.actions.size();
  const size_t S = static_cast<size_t>(s.stages), M = static_cast<size_t>(s.microbatches);
  auto rank_of = [&](int st) { return st < 0 || st >= s.stages ? -1 : s.stage_rank[static_cast<size_t>(st)]; };
  std::vector<std::vector<Action>> lists(p);
  for (size_t r = 0; r < p; ++r) {
    for (const Action& a : s.actions[r]) {
      if (is_compute(a.kind)) lists[r].push_back(a);
    }
  }
  // The unit-cost run: start times per compute; f_end / b_end of (stage, micro-batch).
  const double unset = -1;
  std::vector<double> f_end(S * M, unset), b_end(S * M, unset);
  std::vector<std::vector<double>> start(p), end(p);
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  for (size_t r = 0; r < p; ++r) {
    start[r].assign(lists[r].size(), 0);
    end[r].assign(lists[r].size(), 0);
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < p; ++r) {
      while (next[r] < lists[r].size()) {
        const Action& a = lists[r][next[r]];
        double ready = free_at[r];
        if (a.kind == Kind::F && a.stage > 0) {
          const double t = f_end[static_cast<size_t>(a.stage - 1) * M + static_cast<size_t>(a.microbatch)];
          if (t == unset) break;
          ready = std::max(ready, t);
        }
        if ((a.kind == Kind::B || a.kind == Kind::I) && a.stage + 1 < s.stages) {
          const double t = b_end[static_cast<size_t>(a.stage + 1) * M + static_cast<size_t>(a.microbatch)];
          if (t == unset) break;
          ready = std::max(ready, t);
        }
        const size_t k = next[r]++;
        start[r][k] = ready;
        end[r][k] = free_at[r] = ready + unit_cost(a.kind);
        if (a.kind == Kind::F) f_end[static_cast<size_t>(a.stage) * M + static_cast<size_t>(a.microbatch)] = end[r][k];
        if (a.kind == Kind::B || a.kind == Kind::I) {
          b_end[static_cast<size_t>(a.stage) * M + static_cast<size_t>(a.microbatch)] = end[r][k];
        }
        progress = true;
      }
    }
  }
  for (size_t r = 0; r < p; ++r) {
    if (next[r] < lists[r].size()) {
      fail(Status::internal, "generator: rank %zu's compute order cannot go on at action %zu (%s)", r, next[r],
           to_string(lists[r][next[r]]).c_str());
    }
  }

  // Each rank's messages (both sides) in key order; a SEND sits right after its compute, a RECV
  // as late as that order allows: before the compute that needs it, and before the rank's next
  // message in key order (so no receive waits that need not, whatever the real costs).
  struct Item {
    Message msg;
    bool send;
    size_t limit;  // a SEND: its gap (after its compute); a RECV: the latest gap (its consumer's)
    size_t gap = 0;
  };
  std::vector<std::vector<Item>> items(p);
  std::vector<std::vector<long long>> consumer_keys(p);  // (stage, micro-batch, backward) per compute
  auto consumer_key = [&](int stage, int mb, bool backward) {
    return (static_cast<long long>(stage) * static_cast<long long>(M) + mb) * 2 + (backward ? 1 : 0);
  };
  for (size_t r = 0; r < p; ++r) {
    for (size_t k = 0; k < lists[r].size(); ++k) {
      const Action& a = lists[r][k];
      const bool backward = a.kind == Kind::B || a.kind == Kind::I;
      consumer_keys[r].push_back(a.kind == Kind::F || backward ? consumer_key(a.stage, a.microbatch, backward) : -1);
    }
  }
  for (size_t r = 0; r < p; ++r) {
    for (size_t k = 0; k < lists[r].size(); ++k) {
      const Action& a = lists[r][k];
      const bool backward = a.kind == Kind::B || a.kind == Kind::I;
      if (a.kind != Kind::F && !backward) continue;
      const int to_stage = backward ? a.stage - 1 : a.stage + 1;
      const int q = rank_of(to_stage);
      if (to_stage < 0 || q < 0 || q == static_cast<int>(r)) continue;
      const Message msg{end[r][k], static_cast<int>(r), k,
                        Action{backward ? Kind::SEND_B : Kind::SEND_F, a.stage, a.microbatch},
                        Action{backward ? Kind::RECV_B : Kind::RECV_F, to_stage, a.microbatch}, q};
      items[r].push_back(Item{msg, true, k + 1});
      const auto& ck = consumer_keys[static_cast<size_t>(q)];
      const auto it = std::find(ck.begin(), ck.end(), consumer_key(to_stage, a.microbatch, backward));
      if (it == ck.end()) {
        fail(Status::internal, "generator: rank %d never consumes %s from rank %zu", q,
             to_string(msg.recv).c_str(), r);
      }
      items[static_cast<size_t>(q)].push_back(Item{msg, false, static_cast<size_t>(it - ck.begin())});
    }
  }
  for (size_t r = 0; r < p; ++r) {
    auto& its = items[r];
    std::sort(its.begin(), its.end(), [](const Item& x, const Item& y) {
      return std::tie(x.msg.key, x.msg.sender, x.msg.index) < std::tie(y.msg.key, y.msg.sender, y.msg.index);
    });
    size_t limit = lists[r].size();
    for (size_t k = its.size(); k-- > 0;) {
      Item& it = its[k];
      it.gap = std::min(it.limit, limit);
      if (it.send && it.gap != it.limit) {
        fail(Status::internal, "generator: rank %zu cannot keep %s after its compute in message order", r,
             to_string(it.msg.send).c_str());
      }
      limit = it.gap;
    }
    std::vector<Action> out;
    out.reserve(lists[r].size() + its.size());
    size_t next_item = 0;
    for (size_t j = 0; j <= lists[r].size(); ++j) {
      for (; next_item < its.size() && its[next_item].gap == j; ++next_item) {
        out.push_back(its[next_item].send ? its[next_item].msg.send : its[next_item].msg.recv);
      }
      if (j < lists[r].size()) out.push_back(lists[r][j]);
    }
    s.actions[r] = std::move(out);
  }
}

}  // namespace weft::pipeline::gen
