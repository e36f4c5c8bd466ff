#include "moe_routing.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "collectives.h"

namespace weftbench {
namespace {

// splitmix64: tiny, well mixed, and trivially reproduced anywhere.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (the modulo bias is irrelevant for n <= 2^16).
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

}  // namespace

const char* moe_routing_name(MoeRouting r) { return r == MoeRouting::balanced ? "balanced" : "imbalanced"; }

MoeSelection make_routing(MoeRouting kind, uint64_t seed, size_t tokens, int topk, int experts, int nranks,
                          int rank) {
  // One stream per (seed, kind, tokens, rank): the cases do not share draws.
  SplitMix rng{seed * 0x100000001B3ull ^ (static_cast<uint64_t>(tokens) << 20) ^
               (static_cast<uint64_t>(rank) << 8) ^ (kind == MoeRouting::imbalanced ? 0x5A5Aull : 0ull)};
  const int rank0_experts = (experts + nranks - 1) / nranks;  // torch.chunk's block of rank 0
  MoeSelection sel;
  const size_t n = tokens * static_cast<size_t>(topk);
  sel.indices.resize(n);
  sel.weights.resize(n);
  std::vector<char> taken(static_cast<size_t>(experts));
  for (size_t t = 0; t < tokens; ++t) {
    std::fill(taken.begin(), taken.end(), 0);
    int32_t* idx = &sel.indices[t * static_cast<size_t>(topk)];
    float* w = &sel.weights[t * static_cast<size_t>(topk)];
    for (int j = 0; j < topk; ++j) {
      int e;
      do {
        const bool to_rank0 = kind == MoeRouting::imbalanced && (rng.next() & 1u);
        e = to_rank0 ? rng.below(rank0_experts) : rng.below(experts);
        // rank 0's block can be full (k > its experts): fall back to a uniform draw
        if (to_rank0) {
          bool block_full = true;
          for (int b = 0; b < rank0_experts; ++b) block_full = block_full && taken[static_cast<size_t>(b)];
          if (block_full) e = rng.below(experts);
        }
      } while (taken[static_cast<size_t>(e)]);
      taken[static_cast<size_t>(e)] = 1;
      idx[j] = e;
    }
    float sum = 0.0f;
    for (int j = 0; j < topk; ++j) {
      w[j] = 0.1f + 0.9f * rng.unit();
      sum += w[j];
    }
    for (int j = 0; j < topk; ++j) w[j] /= sum;
  }
  return sel;
}

std::string routing_file_name(MoeRouting kind, size_t tokens, int topk, int experts, int nranks, int rank) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "routing_%s_T%zu_k%d_E%d_n%d_r%d.bin", moe_routing_name(kind), tokens, topk,
                experts, nranks, rank);
  return buf;
}

void write_routing_file(const std::string& dir, MoeRouting kind, size_t tokens, int topk, int experts,
                        int nranks, int rank, const MoeSelection& sel) {
  const std::string path = std::string(dir).append("/").append(
      routing_file_name(kind, tokens, topk, experts, nranks, rank));
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw WeftError(std::string("cannot write routing file ").append(path).append(": ").append(std::strerror(errno)));
  const size_t n = sel.indices.size();
  const bool ok = std::fwrite(sel.indices.data(), sizeof(int32_t), n, f) == n &&
                  std::fwrite(sel.weights.data(), sizeof(float), n, f) == n;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) throw WeftError(std::string("short write to routing file ").append(path));
}

}  // namespace weftbench
