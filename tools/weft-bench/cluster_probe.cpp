#include "cluster_probe.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>

#include "collectives.h"

namespace weftbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The ranks a link of this kind joins, one group per ring: a host's ranks (intra), or the ranks
// with the same position on every host (inter). Groups of one rank have no link to time.
std::vector<std::vector<int>> link_groups(const Topology& topo, LinkKind kind) {
  std::vector<std::vector<int>> groups;
  if (kind == LinkKind::intra) {
    groups = topo.groups;
  } else {
    for (int i = 0; i < topo.ranks_per_host; ++i) {
      std::vector<int> g;
      for (const std::vector<int>& h : topo.groups)
        if (static_cast<size_t>(i) < h.size()) g.push_back(h[static_cast<size_t>(i)]);
      groups.push_back(g);
    }
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const std::vector<int>& g) { return g.size() < 2; }),
               groups.end());
  return groups;
}

// Seconds per step of `steps` ring shifts: every rank sends `bytes` to the next and receives from
// the previous at once (one weft_p2p_batch), which is one step of a ring collective.
double ring_steps(weft_comm_t ring, char* out, char* in, size_t bytes, long steps) {
  int r = 0, n = 1;
  check(weft_comm_rank(ring, &r), "weft_comm_rank");
  check(weft_comm_size(ring, &n), "weft_comm_size");
  const weft_p2p_op_t ops[2] = {{WEFT_P2P_SEND, out, bytes, WEFT_UINT8, (r + 1) % n},
                                {WEFT_P2P_RECV, in, bytes, WEFT_UINT8, (r + n - 1) % n}};
  const Clock::time_point t0 = Clock::now();
  for (long i = 0; i < steps; ++i) check(weft_p2p_batch(ops, 2, ring, nullptr, nullptr), "weft_p2p_batch(ring shift)");
  return seconds_since(t0) / static_cast<double>(steps);
}

// One batch of ring shifts lasting about `seconds`: a calibration batch sets the step count,
// agreed over the ring (its slowest rank's estimate), so every rank runs the same number of steps.
double ring_timed(weft_comm_t ring, char* out, char* in, size_t bytes, double seconds) {
  constexpr long kCalibration = 20;
  double mine = ring_steps(ring, out, in, bytes, kCalibration), slowest = 0;
  check(weft_allreduce(&mine, &slowest, 1, WEFT_FLOAT64, WEFT_MAX, ring, nullptr, nullptr), "weft_allreduce(calibration)");
  const long steps = std::max(kCalibration, static_cast<long>(seconds / std::max(slowest, 1e-9)));
  return ring_steps(ring, out, in, bytes, steps);
}

// A hash of (order, rank) for weft_comm_split's key: order 0 keeps the ranks' order, the others
// shuffle it, the same way on every rank.
int ring_key(int order, int rank) {
  if (order == 0) return rank;
  uint64_t z = (static_cast<uint64_t>(order) << 32 | static_cast<uint32_t>(rank)) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<int>((z ^ (z >> 31)) & 0x3fffffff);
}

// Seconds per one-way trip between a pair: round trips of `bytes` for at least `seconds`, halved.
// The initiator decides when to stop and says so in the message's first byte, so both sides
// agree on the count.
double pingpong(weft_comm_t comm, int peer, bool first, char* buf, size_t bytes, double seconds) {
  const Clock::time_point t0 = Clock::now();
  long trips = 0;
  for (bool more = true; more; ++trips) {
    if (first) {
      more = seconds_since(t0) < seconds || trips < 2;
      buf[0] = more ? 1 : 0;
      check(weft_send(buf, bytes, WEFT_UINT8, peer, comm, nullptr, nullptr), "weft_send(ping)");
      check(weft_recv(buf, bytes, WEFT_UINT8, peer, comm, nullptr, nullptr), "weft_recv(pong)");
    } else {
      check(weft_recv(buf, bytes, WEFT_UINT8, peer, comm, nullptr, nullptr), "weft_recv(ping)");
      more = buf[0] != 0;
      check(weft_send(buf, bytes, WEFT_UINT8, peer, comm, nullptr, nullptr), "weft_send(pong)");
    }
  }
  return seconds_since(t0) / (2.0 * static_cast<double>(trips));
}

// The median of 5 batches (after a warm-up): one batch can catch a descheduled rank.
double pair_timed(weft_comm_t comm, int peer, bool first, char* buf, size_t bytes, double seconds) {
  constexpr int kBatches = 5;
  pingpong(comm, peer, first, buf, bytes, seconds / 4);
  std::vector<double> t;
  for (int b = 0; b < kBatches; ++b) t.push_back(pingpong(comm, peer, first, buf, bytes, seconds));
  return median(t);
}

// The demo's inner loop (examples/moe_digits/linalg.c): float32 in, double accumulation.
void product(const float* x, const float* w, float* y, size_t n) {
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < n; ++c) {
      double s = 0.0;
      for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[r * n + i]) * static_cast<double>(w[i * n + c]);
      y[r * n + c] = static_cast<float>(s);
    }
}

}  // namespace

Topology discover_topology(weft_comm_t comm) {
  Topology t;
  check(weft_comm_size(comm, &t.nranks), "weft_comm_size");
  constexpr size_t kName = 64;
  char mine[kName] = {};
  gethostname(mine, kName - 1);
  std::vector<char> all(kName * static_cast<size_t>(t.nranks));
  check(weft_allgather(mine, all.data(), kName, WEFT_UINT8, comm, nullptr, nullptr), "weft_allgather(hostnames)");
  std::vector<std::string> names;
  for (int r = 0; r < t.nranks; ++r) {
    const std::string name(&all[kName * static_cast<size_t>(r)]);
    if (r == 0) t.first_host = name;
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      names.push_back(name);
      t.groups.push_back({r});
    } else {
      t.groups[static_cast<size_t>(it - names.begin())].push_back(r);
    }
  }
  t.hosts = static_cast<int>(t.groups.size());
  for (const std::vector<int>& g : t.groups) t.ranks_per_host = std::max(t.ranks_per_host, static_cast<int>(g.size()));
  return t;
}

namespace {

// This rank's sub-communicator for one measurement: its ring (ranks shuffled by `order`), or its
// pair (the group's ranks shuffled by `order`, then taken two by two), or NULL.
weft_comm_t link_comm(weft_comm_t comm, const std::vector<std::vector<int>>& groups, Pattern pattern, int order,
                      int rank) {
  int color = WEFT_SPLIT_NOCOLOR, key = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<int> members = groups[g];
    std::sort(members.begin(), members.end(),
              [order](int a, int b) { return std::make_pair(ring_key(order, a), a) < std::make_pair(ring_key(order, b), b); });
    const auto at = std::find(members.begin(), members.end(), rank);
    if (at == members.end()) continue;
    const int pos = static_cast<int>(at - members.begin());
    if (pattern == Pattern::ring) {
      color = static_cast<int>(g), key = pos;
    } else if (pos / 2 * 2 + 1 < static_cast<int>(members.size()) && (pattern == Pattern::pairs || pos < 2)) {
      color = static_cast<int>(g) * 65536 + pos / 2, key = pos % 2;
    }
  }
  weft_comm_t sub = nullptr;
  check(weft_comm_split(comm, color, key, &sub, nullptr), "weft_comm_split(link group)");
  return sub;
}

}  // namespace

LinkResult measure_links(weft_comm_t comm, const Topology& topo, LinkKind kind, Pattern pattern, size_t large,
                         double seconds) {
  int rank = 0;
  check(weft_comm_rank(comm, &rank), "weft_comm_rank");
  std::vector<std::vector<int>> groups = link_groups(topo, kind);
  LinkResult res;
  if (groups.empty()) return res;
  if (pattern == Pattern::pair) groups.resize(1);  // one pair of the first group; the other ranks wait
  res.rings = pattern == Pattern::pair ? 1 : static_cast<int>(groups.size());
  res.ring_size = pattern == Pattern::ring ? static_cast<int>(groups[0].size()) : 2;
  if (pattern == Pattern::pairs) {
    res.rings = 0;
    for (const std::vector<int>& g : groups) res.rings += static_cast<int>(g.size() / 2);
  }
  double mine[2] = {-1.0, -1.0};
  std::vector<char> out(large, 1), in(large, 0);
  // On a machine with more ranks than cores the time depends on which ranks share a core, so
  // rings and pairs are timed in 7 orders of the ranks and the median kept. The machine's load
  // still moves it from one launch to the next (8 ranks on 2 cores shared with compilers: 1 us
  // to 25 us): measure when the machine is as it will be for the runs planned.
  const int orders = pattern == Pattern::pair ? 1 : 7;
  std::vector<double> small_t, large_t;
  for (int order = 0; order < orders; ++order) {
    weft_comm_t sub = link_comm(comm, groups, pattern, order, rank);
    check(weft_barrier(comm, nullptr, nullptr), "weft_barrier");
    if (!sub) continue;
    try {
      if (pattern == Pattern::ring) {
        small_t.push_back(ring_timed(sub, out.data(), in.data(), 8, seconds));
        large_t.push_back(ring_timed(sub, out.data(), in.data(), large, seconds));
      } else {
        int r = 0;
        check(weft_comm_rank(sub, &r), "weft_comm_rank");
        const bool first = r == 0;
        if (pattern == Pattern::pair) {
          small_t.push_back(pair_timed(sub, 1 - r, first, out.data(), 8, seconds));
          large_t.push_back(pair_timed(sub, 1 - r, first, out.data(), large, seconds));
        } else {
          small_t.push_back(pingpong(sub, 1 - r, first, out.data(), 8, seconds));
          large_t.push_back(pingpong(sub, 1 - r, first, out.data(), large, seconds));
        }
      }
    } catch (...) {
      weft_comm_destroy(sub);
      throw;
    }
    check(weft_comm_destroy(sub), "weft_comm_destroy(link group)");
  }
  if (!small_t.empty()) mine[0] = median(small_t), mine[1] = median(large_t);
  std::vector<double> all(2 * static_cast<size_t>(topo.nranks));
  check(weft_allgather(mine, all.data(), 2, WEFT_FLOAT64, comm, nullptr, nullptr), "weft_allgather(link times)");
  std::vector<double> small, big;
  for (size_t r = 0; r < static_cast<size_t>(topo.nranks); ++r)
    if (all[2 * r] >= 0) small.push_back(all[2 * r]), big.push_back(all[2 * r + 1]);
  res.small_s = median(small);
  res.large_s = median(big);
  res.small_min = *std::min_element(small.begin(), small.end());
  res.small_max = *std::max_element(small.begin(), small.end());
  res.large_min = *std::min_element(big.begin(), big.end());
  res.large_max = *std::max_element(big.begin(), big.end());
  // Alpha-beta: t(n) = latency + n / bandwidth through the two sizes; if noise makes the large
  // message no slower than the small one, its plain rate is the only honest number left.
  const double dt = res.large_s - res.small_s;
  res.bandwidth = dt > 0 ? static_cast<double>(large - 8) / dt : static_cast<double>(large) / res.large_s;
  return res;
}

double measure_flops(weft_comm_t comm, double* spread) {
  constexpr size_t n = 64;
  constexpr double kSeconds = 0.3;
  std::vector<float> x(n * n), w(n * n), y(n * n);
  for (size_t i = 0; i < n * n; ++i) {
    x[i] = static_cast<float>(i % 7) * 0.25f;
    w[i] = static_cast<float>(i % 5) * 0.5f;
  }
  check(weft_barrier(comm, nullptr, nullptr), "weft_barrier");
  const Clock::time_point t0 = Clock::now();
  long reps = 0;
  double elapsed = 0.0;
  volatile float sink = 0.0f;  // keeps the products from being optimised away
  do {
    x[static_cast<size_t>(reps) % (n * n)] += 1.0f;  // new inputs each time: nothing to hoist out of the loop
    product(x.data(), w.data(), y.data(), n);
    sink = sink + y[static_cast<size_t>(reps) % (n * n)];
    ++reps;
    elapsed = seconds_since(t0);
  } while (elapsed < kSeconds);
  double mine = 2.0 * n * n * n * static_cast<double>(reps) / elapsed;
  int size = 0;
  check(weft_comm_size(comm, &size), "weft_comm_size");
  std::vector<double> all(static_cast<size_t>(size));
  check(weft_allgather(&mine, all.data(), 1, WEFT_FLOAT64, comm, nullptr, nullptr), "weft_allgather(flops)");
  const double med = median(all);
  const auto mm = std::minmax_element(all.begin(), all.end());
  *spread = med > 0 ? (*mm.second - *mm.first) / med : 0.0;
  return med;
}

namespace {

// One (kind, group size) of measure_busy_collectives: every rank's median extra seconds per
// collective and burst seconds, gathered; the medians over the ranks.
BusyCollective time_busy(weft_comm_t comm, weft_comm_t group, bool alltoall, int g, double* burst) {
  constexpr size_t kN = 48;  // one burst: a 48x48x48 product, ~0.2 ms with 8 ranks on 2 cores
  constexpr int kIters = 100, kBatches = 5;
  std::vector<float> x(kN * kN, 0.5f), w(kN * kN, 0.25f), y(kN * kN);
  volatile float sink = 0.0f;
  std::vector<double> in(static_cast<size_t>(g), 1.0), out(static_cast<size_t>(g), 0.0);
  auto batch = [&](bool with_collective) {
    check(weft_barrier(comm, nullptr, nullptr), "weft_barrier");
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kIters; ++i) {
      x[static_cast<size_t>(i) % (kN * kN)] += 1.0f;
      product(x.data(), w.data(), y.data(), kN);
      sink = sink + y[static_cast<size_t>(i) % (kN * kN)];
      if (!with_collective) continue;
      if (alltoall)
        check(weft_alltoall(in.data(), out.data(), 1, WEFT_FLOAT64, group, nullptr, nullptr), "weft_alltoall(busy)");
      else
        check(weft_allreduce(in.data(), out.data(), 1, WEFT_FLOAT64, WEFT_SUM, group, nullptr, nullptr), "weft_allreduce(busy)");
    }
    return seconds_since(t0);
  };
  std::vector<double> extra, bursts;
  for (int b = 0; b < kBatches; ++b) {
    const double plain = batch(false), with = batch(true);
    extra.push_back((with - plain) / kIters);
    bursts.push_back(plain / kIters);
  }
  double mine[2] = {std::max(0.0, median(extra)), median(bursts)};
  int size = 0;
  check(weft_comm_size(comm, &size), "weft_comm_size");
  std::vector<double> all(2 * static_cast<size_t>(size));
  check(weft_allgather(mine, all.data(), 2, WEFT_FLOAT64, comm, nullptr, nullptr), "weft_allgather(busy)");
  std::vector<double> e, t;
  for (int r = 0; r < size; ++r) {
    e.push_back(all[2 * static_cast<size_t>(r)]);
    t.push_back(all[2 * static_cast<size_t>(r) + 1]);
  }
  *burst = median(t);
  return {alltoall, g, median(e)};
}

}  // namespace

BusyResult measure_busy_collectives(weft_comm_t comm, const Topology& topo) {
  BusyResult res;
  res.ranks = topo.ranks_per_host;
  int rank = 0;
  check(weft_comm_rank(comm, &rank), "weft_comm_rank");
  int host = 0, position = 0;  // this rank's host and its place among the host's ranks
  for (size_t h = 0; h < topo.groups.size(); ++h) {
    const auto it = std::find(topo.groups[h].begin(), topo.groups[h].end(), rank);
    if (it != topo.groups[h].end()) {
      host = static_cast<int>(h);
      position = static_cast<int>(it - topo.groups[h].begin());
    }
  }
  for (int g = 2; g <= topo.ranks_per_host; ++g) {
    if (topo.ranks_per_host % g != 0) continue;
    // Groups of g consecutive ranks of a host; a smaller host's leftover ranks form a smaller one.
    weft_comm_t group = nullptr;
    check(weft_comm_split(comm, host * topo.ranks_per_host + position / g, rank, &group, nullptr), "weft_comm_split(busy)");
    int n = 0;
    check(weft_comm_size(group, &n), "weft_comm_size");
    for (bool alltoall : {false, true}) res.costs.push_back(time_busy(comm, group, alltoall, n, &res.burst));
    res.costs[res.costs.size() - 2].ranks = res.costs.back().ranks = g;
    check(weft_comm_destroy(group), "weft_comm_destroy(busy)");
  }
  return res;
}

}  // namespace weftbench
