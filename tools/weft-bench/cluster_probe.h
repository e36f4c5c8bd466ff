// The measurements behind weft-bench --cluster-file (cluster.h): which ranks share a host, the
// latency and bandwidth of weft_send/weft_recv between them, and a rank's FLOP/s. Every function
// is collective over the communicator (all ranks call it, in the same order).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <weft/weft.h>

namespace weftbench {

struct Topology {
  int nranks = 0;
  int hosts = 0;
  int ranks_per_host = 0;                // the largest host's rank count
  std::vector<std::vector<int>> groups;  // the ranks of each host (by hostname), in rank order
  std::string first_host;                // rank 0's hostname, for the file's comment
};

Topology discover_topology(weft_comm_t comm);

enum class LinkKind { intra, inter };

// Seconds per message of 8 bytes and of `large` bytes: the median over the ranks timed, with
// the ranks' extremes; bandwidth (bytes/s) from the two. rings = 0: no such link in this job (one
// host, or one rank per host).
struct LinkResult {
  int rings = 0, ring_size = 0;
  double small_s = 0, small_min = 0, small_max = 0;
  double large_s = 0, large_min = 0, large_max = 0;
  double bandwidth = 0;
};

// How the links are loaded while timed:
//   ring   every group of ranks a link joins (a host's ranks for intra; the ranks with the same
//          position on each host for inter) shifts messages around a ring, all groups at once:
//          one step of a ring collective with every rank busy communicating.
//   pairs  every rank ping-pongs with a partner of its group, all pairs at once (half a round
//          trip): a rank waits for a partner that may have lost its core to another rank, as
//          collectives inside a training step wait.
//   pair   one pair ping-pongs while the other ranks wait: the link idle.
// Rings and pairs are timed in 7 orders of the ranks (which ranks share a core matters when
// ranks outnumber cores), a batch of about `seconds` per order and size, the median order kept;
// the single pair in 5 batches of about `seconds`, the median batch kept.
enum class Pattern { ring, pairs, pair };
LinkResult measure_links(weft_comm_t comm, const Topology& topo, LinkKind kind, Pattern pattern, size_t large,
                         double seconds);

// What one small collective adds to a rank that computes between collectives, as ranks do
// inside a training step: each host's ranks split into groups of g consecutive ranks (as a
// tp or ep group of that size is laid out), and every rank alternates bursts of the demo's
// products with an 8-byte all-reduce (or an all-to-all of 8 bytes per peer) over its group, all
// groups at once; then it runs the same bursts with no collective. The difference per
// collective, median over 5 batch pairs and over the ranks, for every g >= 2 that divides the
// ranks per host and both kinds. When ranks outnumber cores this is dominated by waiting for
// descheduled ranks, which a ping-pong between two ranks does not see. Empty when every host
// has one rank.
struct BusyCollective {
  bool alltoall = false;  // else all-reduce
  int ranks = 0;          // group size
  double seconds = 0;     // added per collective
};
struct BusyResult {
  int ranks = 0;                       // ranks per host (the largest host's)
  std::vector<BusyCollective> costs;  // by group size, all-reduce then all-to-all
  double burst = 0;                    // seconds of one compute burst with every rank computing
};
BusyResult measure_busy_collectives(weft_comm_t comm, const Topology& topo);

// FLOP/s of one rank while every rank computes (the median over ranks); *spread = (max - min) /
// median over the ranks.
double measure_flops(weft_comm_t comm, double* spread);

}  // namespace weftbench
