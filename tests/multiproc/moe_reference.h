// A dense single-process MoE layer, written independently of weft, that test_moe.cpp compares
// weft_moe_dispatch / _combine / _combine_backward against: experts are 2-layer MLPs
// (W1 [H, F], relu or tanh, W2 [F, H]); every token goes through its top-k experts and the k
// outputs are combined in slot order in float32 and rounded once to the token dtype.
//
// Why bitwise equality with the distributed layer is possible: an expert's row math depends on
// that row alone (expert_forward / expert_backward below are the only expert code, called by the
// reference and by the ranks on each received row), and everything weft adds has a fixed order
// that does not depend on the number of ranks: combine sums a token's slots in slot order on the
// token's own rank, grad_weights is a dot product in element order, and a weight gradient is a
// sum over the expert's rows, which arrive expert-major by (source rank, token, slot); with
// every rank's tokens a contiguous slice of the global batch that is global token order, the
// order the reference accumulates in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace mpt::moe {

enum class Act { relu, tanh };

// The global problem. routing: "random" (k distinct experts per token, some slots dropped),
// "local" (each token only to experts on its own rank), "skip_last" (no expert of the last rank
// is chosen), "dropped" (every slot WEFT_MOE_DROPPED).
struct Problem {
  size_t tokens = 16;
  size_t hidden = 8;
  size_t ffn = 6;
  int experts = 4;
  int topk = 2;
  weft_dtype_t dtype = WEFT_FLOAT32;
  Act act = Act::relu;
  std::string routing = "random";
  uint64_t seed = 1;
};

// Values as float; token data (x, grad_out) already rounded to dtype.
struct Data {
  std::vector<float> x;        // [T, H]
  std::vector<int32_t> index;  // [T, k]
  std::vector<float> weight;   // [T, k]
  std::vector<float> grad_out; // [T, H]
  std::vector<float> w1;       // [E, H, F]
  std::vector<float> w2;       // [E, F, H]
};

// nranks: the placement the "local" and "skip_last" routings are made for (torch.chunk's rule).
Data make_data(const Problem& p, int nranks);

// The first global token of rank r's slice (r = nranks: the end).
size_t slice_begin(size_t tokens, int nranks, int r);
// torch.chunk's rule, written out: the rank of expert e.
int chunk_rank(int experts, int nranks, int e);

// Rounding to the token dtype (FLOAT32: identity; BFLOAT16: round to nearest even), and
// conversion of float values to and from the dtype's bytes.
float round_to(weft_dtype_t dt, float v);
std::vector<unsigned char> to_bytes(weft_dtype_t dt, const float* v, size_t n);
std::vector<float> from_bytes(weft_dtype_t dt, const void* b, size_t n);

// One row through expert e: y = W2^T act(W1^T x), float32, rounded to dtype.
void expert_forward(const Problem& p, const Data& d, int e, const float* x, float* y);
// Its backward for one row: dx (rounded to dtype), and dW1, dW2 accumulated (+=) in float32.
void expert_backward(const Problem& p, const Data& d, int e, const float* x, const float* dy, float* dx, float* dw1,
                     float* dw2);

struct Result {
  std::vector<float> out;     // [T, H]
  std::vector<float> grad_w;  // [T, k] the routing weights' gradient
  std::vector<float> grad_x;  // [T, H]
  std::vector<float> dw1, dw2;  // [E, H, F], [E, F, H]
};

Result reference(const Problem& p, const Data& d);

}  // namespace mpt::moe
