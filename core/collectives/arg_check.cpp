#include "core/collectives/arg_check.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace weft::coll {
namespace {

struct Wire {
  char operation[24];
  int32_t dtype, op, root, pad;
  uint64_t count, layout_hash;
  uint64_t pair_count;  // what the sender sends to the receiver (alltoallv), else kNotCompared
};

struct Verdict {
  char text[240];  // empty = this rank saw no disagreement
};

std::string describe(const Wire& w) {
  std::string s = format("%s(count=", w.operation);
  s += w.count == kNotCompared ? "-" : std::to_string(w.count);
  if (w.dtype >= 0) s += format(", dtype=%s", dtype_name(static_cast<DType>(w.dtype)));
  if (w.op >= 0) s += format(", op=%s", op_name(static_cast<ReduceOp>(w.op)));
  if (w.root >= 0) s += format(", root=%d", w.root);
  return s + ")";
}

}  // namespace

uint64_t hash_sizes(const std::vector<size_t>& a, const std::vector<size_t>& b) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
  for (const auto* v : {&a, &b}) {
    for (size_t x : *v) {
      for (int i = 0; i < 8; ++i) {
        h ^= (x >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
      }
    }
  }
  return h;
}

void check_signature(Channel& ch, const CallSignature& mine) {
  if (!ch.comm().config().check_collectives) return;
  const int n = ch.size(), rank = ch.rank();
  std::vector<Wire> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    Wire& w = out[static_cast<size_t>(p)];
    std::memset(&w, 0, sizeof(w));
    std::strncpy(w.operation, mine.operation, sizeof(w.operation) - 1);
    w.dtype = mine.dtype;
    w.op = mine.op;
    w.root = mine.root;
    w.count = mine.count;
    w.layout_hash = mine.layout_hash;
    w.pair_count = mine.send_counts ? (*mine.send_counts)[static_cast<size_t>(p)] : kNotCompared;
  }
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    ch.irecv(p, kCheckStepBase, &in[static_cast<size_t>(p)], sizeof(Wire));
    ch.isend(p, kCheckStepBase, &out[static_cast<size_t>(p)], sizeof(Wire));
  }
  ch.wait();
  in[static_cast<size_t>(rank)] = out[static_cast<size_t>(rank)];
  const Wire& me = out[static_cast<size_t>(rank)];
  // What this rank can see: a rank that disagrees with it, or a peer that will send it a
  // different count than it expects (alltoallv; only the receiver sees that).
  Verdict mine_verdict{};
  for (int p = 0; p < n && !mine_verdict.text[0]; ++p) {
    const Wire& w = in[static_cast<size_t>(p)];
    bool same = std::strncmp(w.operation, me.operation, sizeof(w.operation)) == 0 && w.dtype == me.dtype &&
                w.op == me.op && w.root == me.root && w.count == me.count && w.layout_hash == me.layout_hash;
    if (!same) {
      std::snprintf(mine_verdict.text, sizeof(mine_verdict.text), "rank %d called %s but rank %d called %s", rank,
                    describe(me).c_str(), p, describe(w).c_str());
    } else if (mine.recv_counts && w.pair_count != (*mine.recv_counts)[static_cast<size_t>(p)]) {
      std::snprintf(mine_verdict.text, sizeof(mine_verdict.text), "rank %d sends %llu elements to rank %d, which expects %zu",
                    p, static_cast<unsigned long long>(w.pair_count), rank, (*mine.recv_counts)[static_cast<size_t>(p)]);
    }
  }
  // Second round: every rank learns every verdict, so all fail together with the same words
  // (the lowest rank's finding) instead of some waiting out the deadline.
  std::vector<Verdict> verdicts(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    ch.irecv(p, kCheckStepBase + 1, &verdicts[static_cast<size_t>(p)], sizeof(Verdict));
    ch.isend(p, kCheckStepBase + 1, &mine_verdict, sizeof(Verdict));
  }
  ch.wait();
  verdicts[static_cast<size_t>(rank)] = mine_verdict;
  for (int p = 0; p < n; ++p) {
    Verdict& v = verdicts[static_cast<size_t>(p)];
    v.text[sizeof(v.text) - 1] = '\0';
    if (v.text[0]) fail(Status::mismatch, "%s #%u: %s", me.operation, ch.sequence(), v.text);
  }
}

}  // namespace weft::coll
