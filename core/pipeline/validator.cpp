// validate(): weft_schedule_validate's rules (weft/pipeline.h), checked in the order placement,
// complete, transfers, order, no deadlock, so that each rule may rely on the ones before it (the
// order rule looks actions up on their stage's rank because placement passed, the simulation
// pairs messages because transfers passed). The first broken rule throws, naming the rank, the
// action index, the action (torch's string) and the rule.
//
// Everything is indexed in flat arrays by (kind, stage, micro-batch), so a schedule of p = 8,
// m = 32, v = 4 (a few thousand actions) is checked in well under a millisecond.
#include <unordered_set>

#include "core/common/status.h"
#include "core/pipeline/validator_internal.h"

namespace weft::pipeline {

namespace {

using detail::broken;

// Where each action sits in its stage's rank's list (placement has passed, so that rank is the
// only one that can hold it), and the first duplicate of each family.
struct Index {
  const Schedule& s;
  size_t S, M;
  std::vector<int> pos;     // [(kind * S + stage) * M + mb], kinds F..RECV_B; -1 = absent
  std::vector<int> reduce;  // REDUCE_GRAD per stage
  // A second occurrence: rank, index, and the index of the first.
  struct Dup {
    int rank = -1;
    size_t index = 0;
    int first = -1;
  } dup_compute, dup_comm, dup_reduce;

  explicit Index(const Schedule& sched)
      : s(sched), S(static_cast<size_t>(sched.stages)), M(static_cast<size_t>(sched.microbatches)) {
    pos.assign(static_cast<size_t>(kNumKinds - 1) * S * M, -1);
    reduce.assign(S, -1);
    for (size_t r = 0; r < s.actions.size(); ++r) {
      for (size_t k = 0; k < s.actions[r].size(); ++k) {
        const Action& a = s.actions[r][k];
        int& slot = a.kind == Kind::REDUCE_GRAD ? reduce[static_cast<size_t>(a.stage)] : at_ref(a.kind, a.stage, a.microbatch);
        if (slot < 0) {
          slot = static_cast<int>(k);
          continue;
        }
        Dup& d = a.kind == Kind::REDUCE_GRAD ? dup_reduce : is_comm(a.kind) ? dup_comm : dup_compute;
        if (d.rank < 0) d = Dup{static_cast<int>(r), k, slot};
      }
    }
  }
  int& at_ref(Kind k, int st, int mb) {
    return pos[(static_cast<size_t>(k) * S + static_cast<size_t>(st)) * M + static_cast<size_t>(mb)];
  }
  int at(Kind k, int st, int mb) const {
    return pos[(static_cast<size_t>(k) * S + static_cast<size_t>(st)) * M + static_cast<size_t>(mb)];
  }
  // B(st, mb), else I(st, mb): the action that makes the input gradient (-1 if neither).
  int backward_input(int st, int mb) const {
    const int b = at(Kind::B, st, mb);
    return b >= 0 ? b : at(Kind::I, st, mb);
  }
};

std::string act(Kind k, int st, int mb) { return to_string(Action{k, st, mb}); }

int rank_of(const Schedule& s, int st) { return s.stage_rank[static_cast<size_t>(st)]; }

// The Schedule struct itself must be consistent before any action can be judged; only a
// hand-built struct (not make_schedule, from_csv or load) can fail this.
void check_shape(const Schedule& s) {
  if (s.ranks < 1 || s.actions.size() != static_cast<size_t>(s.ranks)) {
    fail(Status::invalid_argument, "schedule: %d ranks but %zu action lists; expected ranks >= 1 and one list per rank",
         s.ranks, s.actions.size());
  }
  if (s.stages < 1 || s.microbatches < 1 || s.stage_rank.size() != static_cast<size_t>(s.stages)) {
    fail(Status::invalid_argument, "schedule: %d stages, %d micro-batches, %zu placement entries; expected >= 1, >= 1 "
         "and one entry per stage", s.stages, s.microbatches, s.stage_rank.size());
  }
  for (size_t st = 0; st < s.stage_rank.size(); ++st) {
    if (s.stage_rank[st] < -1 || s.stage_rank[st] >= s.ranks) {
      fail(Status::invalid_argument, "schedule: stage %zu is placed on rank %d; expected -1 or 0..%d", st,
           s.stage_rank[st], s.ranks - 1);
    }
  }
}

void check_placement(const Schedule& s) {
  for (size_t r = 0; r < s.actions.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action& a = s.actions[r][k];
      const int kind = static_cast<int>(a.kind);
      if (kind < 0 || kind >= kNumKinds) broken(s, rank, k, "placement", format("kind %d is not an action kind", kind));
      if (a.stage < 0 || a.stage >= s.stages) {
        broken(s, rank, k, "placement", format("stage %d is not one of the schedule's %d stages", a.stage, s.stages));
      }
      const bool rg = a.kind == Kind::REDUCE_GRAD;
      if (rg ? a.microbatch != -1 : (a.microbatch < 0 || a.microbatch >= s.microbatches)) {
        broken(s, rank, k, "placement",
               rg ? format("REDUCE_GRAD takes micro-batch -1, not %d", a.microbatch)
                  : format("micro-batch %d is not one of the schedule's %d", a.microbatch, s.microbatches));
      }
      const int holder = rank_of(s, a.stage);
      if (holder < 0) {
        broken(s, rank, k, "placement", format("stage %d is on no rank (no list runs an F of it)", a.stage));
      }
      if (holder != rank) {
        broken(s, rank, k, "placement",
               format("stage %d is on rank %d (the first rank whose list runs an F of it), not on rank %d", a.stage,
                      holder, rank));
      }
    }
  }
}

// A missing F(st, mb): blamed on its backward when that exists, else on the stage's rank.
[[noreturn]] void missing_forward(const Schedule& s, const Index* ix, int st, int mb) {
  const int q = rank_of(s, st);
  if (q < 0) {
    fail(Status::invalid_argument, "stage %d: rule 'complete': no rank runs stage %d (no list holds an F of it)", st, st);
  }
  if (ix) {
    for (Kind k : {Kind::B, Kind::I, Kind::W}) {
      const int at = ix->at(k, st, mb);
      if (at >= 0) broken(s, q, static_cast<size_t>(at), "complete", format("its forward %s never runs", act(Kind::F, st, mb).c_str()));
    }
  }
  fail(Status::invalid_argument, "rank %d: rule 'complete': %s never runs (stage %d is on rank %d, whose list has no %s)",
       q, act(Kind::F, st, mb).c_str(), st, q, act(Kind::F, st, mb).c_str());
}

// S x m forwards must exist; when the lists are too short for that, name a missing one without
// allocating S x m slots (S and m of a hand-made schedule may be large).
void check_enough_forwards(const Schedule& s) {
  size_t forwards = 0;
  for (const auto& list : s.actions) {
    for (const Action& a : list) forwards += a.kind == Kind::F;
  }
  const size_t need = static_cast<size_t>(s.stages) * static_cast<size_t>(s.microbatches);
  if (need <= forwards) return;
  std::unordered_set<int64_t> have;
  for (const auto& list : s.actions) {
    for (const Action& a : list) {
      if (a.kind == Kind::F) have.insert(int64_t{a.stage} * s.microbatches + a.microbatch);
    }
  }
  for (int st = 0; st < s.stages; ++st) {
    for (int mb = 0; mb < s.microbatches; ++mb) {
      if (!have.count(int64_t{st} * s.microbatches + mb)) missing_forward(s, nullptr, st, mb);
    }
  }
}

void check_complete(const Schedule& s, const Index& ix) {
  if (ix.dup_compute.rank >= 0) {
    const auto& d = ix.dup_compute;
    broken(s, d.rank, d.index, "complete", format("it runs twice (first at action %d)", d.first));
  }
  for (size_t r = 0; r < s.actions.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action& a = s.actions[r][k];
      const int st = a.stage, mb = a.microbatch;
      const int b = mb >= 0 ? ix.at(Kind::B, st, mb) : -1, i = mb >= 0 ? ix.at(Kind::I, st, mb) : -1,
                w = mb >= 0 ? ix.at(Kind::W, st, mb) : -1;
      switch (a.kind) {
        case Kind::F:
          if (b < 0 && i < 0 && w < 0) {
            broken(s, rank, k, "complete", format("its backward never runs (no %s, nor %s and %s)", act(Kind::B, st, mb).c_str(),
                                                  act(Kind::I, st, mb).c_str(), act(Kind::W, st, mb).c_str()));
          }
          break;
        case Kind::B:
          if (i >= 0 || w >= 0) {
            broken(s, rank, k, "complete",
                   format("the backward of (%d, %d) also runs split (action %d); it runs once: B, or I and W", st, mb,
                          i >= 0 ? i : w));
          }
          break;
        case Kind::I:
          if (w < 0) broken(s, rank, k, "complete", format("its %s never runs; I and W together are one backward", act(Kind::W, st, mb).c_str()));
          break;
        case Kind::W:
          if (i < 0) broken(s, rank, k, "complete", format("its %s never runs; I and W together are one backward", act(Kind::I, st, mb).c_str()));
          break;
        default:
          break;
      }
    }
  }
  for (int st = 0; st < s.stages; ++st) {
    for (int mb = 0; mb < s.microbatches; ++mb) {
      if (ix.at(Kind::F, st, mb) < 0) missing_forward(s, &ix, st, mb);
    }
  }
}

// The action a SEND/RECV pairs with on the other rank.
Action partner_of(const Action& a) {
  switch (a.kind) {
    case Kind::SEND_F: return {Kind::RECV_F, a.stage + 1, a.microbatch};
    case Kind::RECV_F: return {Kind::SEND_F, a.stage - 1, a.microbatch};
    case Kind::SEND_B: return {Kind::RECV_B, a.stage - 1, a.microbatch};
    default: return {Kind::SEND_B, a.stage + 1, a.microbatch};
  }
}

void check_comm_action(const Schedule& s, const Index& ix, int rank, size_t k) {
  const Action& a = s.actions[static_cast<size_t>(rank)][k];
  const Action other = partner_of(a);
  const char* dir = a.kind == Kind::SEND_F || a.kind == Kind::RECV_B ? "next" : "previous";
  if (other.stage < 0 || other.stage >= s.stages) {
    broken(s, rank, k, "transfers", format("stage %d has no %s stage to exchange with", a.stage, dir));
  }
  const int q = rank_of(s, other.stage);
  if (q == rank) {
    broken(s, rank, k, "transfers",
           format("stage %d is on this rank too: nothing is sent between stages on one rank", other.stage));
  }
  if (ix.at(other.kind, other.stage, other.microbatch) < 0) {
    broken(s, rank, k, "transfers",
           format("no rank %s it (stage %d is on rank %d, whose list has no %s)", is_send(a.kind) ? "receives" : "sends",
                  other.stage, q, to_string(other).c_str()));
  }
}

// A compute action whose neighbour stage is on another rank needs its SEND/RECV on this rank.
void need_transfer(const Schedule& s, const Index& ix, int rank, size_t k, Kind comm, int neighbour, const char* what) {
  if (neighbour < 0 || neighbour >= s.stages) return;
  const int q = rank_of(s, neighbour);
  if (q == rank) return;
  const Action& a = s.actions[static_cast<size_t>(rank)][k];
  if (ix.at(comm, a.stage, a.microbatch) < 0) {
    broken(s, rank, k, "transfers",
           format("%s (stage %d is on rank %d; this rank's list has no %s)", what, neighbour, q,
                  act(comm, a.stage, a.microbatch).c_str()));
  }
}

void check_transfers(const Schedule& s, const Index& ix, const detail::Partners& partners) {
  if (ix.dup_comm.rank >= 0) {
    const auto& d = ix.dup_comm;
    const bool send = is_send(s.actions[static_cast<size_t>(d.rank)][d.index].kind);
    broken(s, d.rank, d.index, "transfers", format("it is %s twice (first at action %d)", send ? "sent" : "received", d.first));
  }
  for (size_t r = 0; r < s.actions.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action& a = s.actions[r][k];
      if (is_comm(a.kind)) {
        check_comm_action(s, ix, rank, k);
      } else if (a.kind == Kind::F) {
        need_transfer(s, ix, rank, k, Kind::RECV_F, a.stage - 1, "its input is never received");
        need_transfer(s, ix, rank, k, Kind::SEND_F, a.stage + 1, "its output is never sent");
      } else if (a.kind == Kind::B || a.kind == Kind::I) {
        need_transfer(s, ix, rank, k, Kind::RECV_B, a.stage + 1, "its output gradient is never received");
        need_transfer(s, ix, rank, k, Kind::SEND_B, a.stage - 1, "its input gradient is never sent");
      }
    }
  }
  // Every message now has exactly one partner action; the k-th send from a to b must also be
  // the k-th receive at b from a, or the two ranks would match the wrong buffers.
  for (size_t r = 0; r < s.actions.size(); ++r) {
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action& a = s.actions[r][k];
      if (!is_send(a.kind)) continue;
      const detail::Place& q = partners[r][k];
      const Action expected = partner_of(a);
      const Action& got = s.actions[static_cast<size_t>(q.rank)][static_cast<size_t>(q.index)];
      if (!(got == expected)) {
        broken(s, static_cast<int>(r), k, "transfers",
               format("messages from rank %zu to rank %d arrive in the order they are sent, so it meets rank %d's "
                      "action %d (%s), not its %s (action %d)",
                      r, q.rank, q.rank, q.index, to_string(got).c_str(), to_string(expected).c_str(),
                      ix.at(expected.kind, expected.stage, expected.microbatch)));
      }
    }
  }
}

// Fails unless the action at `need` (on this rank) comes before index k.
void need_before(const Schedule& s, int rank, size_t k, int need, const Action& needed, const char* what) {
  if (need >= 0 && static_cast<size_t>(need) < k) return;
  broken(s, rank, k, "order",
         need < 0 ? format("%s: %s never runs on this rank", what, to_string(needed).c_str())
                  : format("%s: %s is action %d, after it", what, to_string(needed).c_str(), need));
}

void check_order(const Schedule& s, const Index& ix) {
  if (ix.dup_reduce.rank >= 0) {
    const auto& d = ix.dup_reduce;
    broken(s, d.rank, d.index, "order", format("REDUCE_GRAD runs at most once per stage (first at action %d)", d.first));
  }
  for (size_t r = 0; r < s.actions.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action& a = s.actions[r][k];
      const int st = a.stage, mb = a.microbatch;
      switch (a.kind) {
        case Kind::F:
          if (st > 0) {
            const bool local = rank_of(s, st - 1) == rank;
            const Action in = local ? Action{Kind::F, st - 1, mb} : Action{Kind::RECV_F, st, mb};
            need_before(s, rank, k, ix.at(in.kind, in.stage, in.microbatch), in, "its input is not there yet");
          }
          break;
        case Kind::B:
        case Kind::I:
          need_before(s, rank, k, ix.at(Kind::F, st, mb), Action{Kind::F, st, mb}, "it runs before its forward");
          if (st + 1 < s.stages) {
            if (rank_of(s, st + 1) == rank) {
              const int b = ix.backward_input(st + 1, mb);
              const Kind kind = ix.at(Kind::B, st + 1, mb) >= 0 ? Kind::B : Kind::I;
              need_before(s, rank, k, b, Action{kind, st + 1, mb}, "its output gradient is not there yet");
            } else {
              need_before(s, rank, k, ix.at(Kind::RECV_B, st, mb), Action{Kind::RECV_B, st, mb},
                          "its output gradient is not there yet");
            }
          }
          break;
        case Kind::W:
          need_before(s, rank, k, ix.at(Kind::I, st, mb), Action{Kind::I, st, mb}, "W needs its I first");
          break;
        case Kind::SEND_F:
          need_before(s, rank, k, ix.at(Kind::F, st, mb), Action{Kind::F, st, mb}, "it sends an output not made yet");
          break;
        case Kind::SEND_B: {
          const Kind kind = ix.at(Kind::B, st, mb) >= 0 ? Kind::B : Kind::I;
          need_before(s, rank, k, ix.backward_input(st, mb), Action{kind, st, mb}, "it sends a gradient not made yet");
          break;
        }
        case Kind::REDUCE_GRAD:
          for (int i = 0; i < s.microbatches; ++i) {
            const int b = ix.at(Kind::B, st, i);
            const Action last = b >= 0 ? Action{Kind::B, st, i} : Action{Kind::W, st, i};
            need_before(s, rank, k, b >= 0 ? b : ix.at(Kind::W, st, i), last,
                        "the stage's gradients are not complete");
            if (b < 0) need_before(s, rank, k, ix.at(Kind::I, st, i), Action{Kind::I, st, i}, "the stage's gradients are not complete");
          }
          break;
        default:
          break;  // a RECV may be posted any time; the simulation judges whether it completes
      }
    }
  }
}

}  // namespace

void validate(const Schedule& s) {
  check_shape(s);
  check_placement(s);
  check_enough_forwards(s);
  const Index ix(s);
  check_complete(s, ix);
  const detail::Partners partners = detail::pair_messages(s);
  check_transfers(s, ix, partners);
  check_order(s, ix);
  detail::check_deadlock(s, partners);
}

}  // namespace weft::pipeline
