// weft-bench moe's routing: which experts each token of each rank picks, and with what weights,
// as a pure function of (seed, case, rank), so every rank can regenerate every other rank's
// routing to check what dispatch delivered, and bench/moe_peer.py can be handed the very same
// selections (write_routing_file) instead of a second generator that might drift.
//
//   balanced     each token's k experts are k distinct experts drawn uniformly from all E
//   imbalanced   each slot goes, with probability 1/2, to an expert of rank 0 (the contiguous
//                block rule of weft/moe.h: experts [0, ceil(E/N))), otherwise to one drawn
//                uniformly from all E; still k distinct experts per token
//
// Weights: k values drawn from [0.1, 1), divided by their float32 sum, so they sum to 1 within
// float32 rounding (the combine-of-dispatch check relies on it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weftbench {

enum class MoeRouting { balanced, imbalanced };

const char* moe_routing_name(MoeRouting r);

struct MoeSelection {
  std::vector<int32_t> indices;  // [tokens * topk]
  std::vector<float> weights;    // [tokens * topk]
};

// The routing of `rank`'s `tokens` tokens (k distinct experts each; requires topk <= experts).
MoeSelection make_routing(MoeRouting kind, uint64_t seed, size_t tokens, int topk, int experts, int nranks,
                          int rank);

// The file bench/moe_peer.py reads for (kind, tokens, rank): "<dir>/<name>" with name from
// routing_file_name; layout: int32 indices [tokens*topk] then float32 weights [tokens*topk],
// little-endian, no header (the name carries the shape).
std::string routing_file_name(MoeRouting kind, size_t tokens, int topk, int experts, int nranks, int rank);
// Writes it; throws WeftError naming the path on failure.
void write_routing_file(const std::string& dir, MoeRouting kind, size_t tokens, int topk, int experts,
                        int nranks, int rank, const MoeSelection& sel);

}  // namespace weftbench
