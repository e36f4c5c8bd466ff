// The MoE router on host memory (moe_router.h): the per-token work of moe_router_ops.h in a
// loop over tokens, then the cross-token passes (dropping, counts, the losses' blocked sums).
//
// fp-contract=off, for this file only: a*b+c stays two rounded operations on every target and
// with any -march, as nvcc --fmad=false keeps them on the GPU: the twins must agree bit for bit.
#pragma GCC optimize("fp-contract=off")

#include "kernels/cpu/moe_router.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/common/status.h"
#include "kernels/cpu/moe_router_ops.h"

namespace weft::kernels {
namespace {

namespace ops = detail;

ops::RouterRowConfig row_config(const RouterConfig& c, DType dtype) {
  const bool limited = c.groups > 1;
  return ops::RouterRowConfig{c.experts, c.topk, c.score, c.normalize ? 1 : 0, limited ? c.groups : 1,
                              limited ? c.topk_groups : 1, dtype == DType::bf16 ? 1 : 0};
}

// One token's scratch, reused row after row.
struct RowBuffers {
  std::vector<float> f;
  std::vector<int32_t> idx;
  ops::RouterScratch r;
  RowBuffers(int experts, int topk)
      : f(ops::router_scratch_floats(experts, topk)), idx(static_cast<size_t>(topk)),
        r(ops::router_scratch(f.data(), idx.data(), experts, topk)) {}
};

const void* row_of(const void* logits, DType dtype, size_t t, int experts) {
  return static_cast<const uint8_t*>(logits) + t * static_cast<size_t>(experts) * dtype_size(dtype);
}

// Marks the dropped slots of indices [T, k] (pre-drop) in keep: per expert, the capacity's
// worth of its assignments by position or by weight (moe_router_ops.h's order).
void capacity_keep(const RouterConfig& c, size_t tokens, const int32_t* idx, const float* w, std::vector<char>& keep) {
  const size_t k = static_cast<size_t>(c.topk);
  const int64_t cap = ops::router_capacity(tokens, c.topk, c.experts, c.capacity_factor);
  keep.assign(tokens * k, 1);
  if (c.drop == ops::kDropByPosition) {
    std::vector<int64_t> seen(static_cast<size_t>(c.experts), 0);
    for (size_t s = 0; s < tokens * k; ++s) {
      if (seen[static_cast<size_t>(idx[s])]++ >= cap) keep[s] = 0;
    }
    return;
  }
  std::vector<std::vector<size_t>> per(static_cast<size_t>(c.experts));
  for (size_t s = 0; s < tokens * k; ++s) per[static_cast<size_t>(idx[s])].push_back(s);
  for (auto& list : per) {
    if (static_cast<int64_t>(list.size()) <= cap) continue;
    std::sort(list.begin(), list.end(),
              [&](size_t a, size_t b) { return ops::router_outranks(w[a], a / k, w[b], b / k); });
    for (size_t i = static_cast<size_t>(cap); i < list.size(); ++i) keep[list[i]] = 0;
  }
}

// A selector's choice for every token: the selection scores of all rows in one array, one call,
// then the checks weft/plugin.h promises (each index in [0, E), a token's k distinct), the
// offending token named. Empty for T = 0 (the plugin is not called).
std::vector<int32_t> plugin_selection(const void* logits, DType dtype, size_t tokens, const RouterConfig& c,
                                      const ops::RouterRowConfig& rc, RowBuffers& rb, const char* what) {
  const size_t E = static_cast<size_t>(c.experts), k = static_cast<size_t>(c.topk);
  std::vector<int32_t> idx(tokens * k, -1);
  if (tokens == 0) return idx;
  std::vector<float> sel(tokens * E);
  for (size_t t = 0; t < tokens; ++t) {
    ops::router_row_scores(rc, row_of(logits, dtype, t, c.experts), c.bias, rb.r);
    std::copy(rb.r.sel, rb.r.sel + E, sel.begin() + static_cast<std::ptrdiff_t>(t * E));
  }
  const char* name = c.selector.name ? c.selector.name : "router plugin";
  const int32_t ret = c.selector.fn(sel.data(), tokens, c.experts, c.topk, idx.data());
  if (ret != 0) {
    // A plugin may return one of weft's status codes (1-9) to say what went wrong.
    const Status status = ret >= 1 && ret <= 9 ? static_cast<Status>(ret) : Status::invalid_argument;
    fail(status, "%s: %s failed (returned %d) on %zu tokens, %d experts, topk %d", what, name,
         static_cast<int>(ret), tokens, c.experts, c.topk);
  }
  std::vector<size_t> seen(E, 0);  // token + 1 that last chose each expert, and its slot
  std::vector<size_t> slot_of(E, 0);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t j = 0; j < k; ++j) {
      const int32_t e = idx[t * k + j];
      if (e < 0 || e >= c.experts) {
        fail(Status::invalid_argument, "%s: %s chose expert %d for token %zu, slot %zu; expected an expert in [0, %d)",
             what, name, static_cast<int>(e), t, j, c.experts);
      }
      const size_t ue = static_cast<size_t>(e);
      if (seen[ue] == t + 1) {
        fail(Status::invalid_argument,
             "%s: %s chose expert %d twice for token %zu (slots %zu and %zu); a token's %d experts must be distinct",
             what, name, static_cast<int>(e), t, slot_of[ue], j, c.topk);
      }
      seen[ue] = t + 1;
      slot_of[ue] = j;
    }
  }
  return idx;
}

// Token t's row in rb: the built-in selection, or the selector's (`chosen`, [T, k]) with the
// scores and weights computed around it.
void row_forward(const ops::RouterRowConfig& rc, const void* x, const float* bias, const std::vector<int32_t>& chosen,
                 size_t t, RowBuffers& rb) {
  if (chosen.empty()) {
    ops::router_row_forward(rc, x, bias, rb.r);
    return;
  }
  const size_t k = static_cast<size_t>(rc.topk);
  ops::router_row_scores(rc, x, bias, rb.r);
  for (size_t j = 0; j < k; ++j) rb.r.idx[j] = chosen[t * k + j];
  ops::router_row_weights(rc, rb.r);
}

}  // namespace

void check_router_config(const RouterConfig& c, DType dtype, const char* what) {
  if (dtype != DType::f32 && dtype != DType::bf16) {
    fail(Status::invalid_argument, "%s: logits dtype %s; expected FLOAT32 or BFLOAT16", what, dtype_name(dtype));
  }
  if (c.experts < 1) fail(Status::invalid_argument, "%s: config->experts = %d; expected >= 1", what, c.experts);
  if (c.topk < 1 || c.topk > c.experts) {
    fail(Status::invalid_argument, "%s: config->topk = %d; expected 1 <= topk <= experts (%d)", what, c.topk,
         c.experts);
  }
  if (c.score < ops::kRouterSoftmax || c.score > ops::kRouterSigmoid) {
    fail(Status::invalid_argument, "%s: config->score = %d is not a weft_router_score_t", what, c.score);
  }
  if (c.drop < ops::kDropNone || c.drop > ops::kDropByPosition) {
    fail(Status::invalid_argument, "%s: config->drop = %d is not a weft_router_drop_t", what, c.drop);
  }
  if (c.drop != ops::kDropNone && !(c.capacity_factor > 0.0 && std::isfinite(c.capacity_factor))) {
    fail(Status::invalid_argument, "%s: config->capacity_factor = %g; expected a finite value > 0 when dropping",
         what, c.capacity_factor);
  }
  if (c.groups > 1) {
    if (c.experts % c.groups != 0) {
      fail(Status::invalid_argument, "%s: config->groups = %d does not divide experts (%d)", what, c.groups,
           c.experts);
    }
    if (c.topk_groups < 1 || c.topk_groups > c.groups) {
      fail(Status::invalid_argument, "%s: config->topk_groups = %d; expected 1 <= topk_groups <= groups (%d)", what,
           c.topk_groups, c.groups);
    }
    if (static_cast<int64_t>(c.topk_groups) * (c.experts / c.groups) < c.topk) {
      fail(Status::invalid_argument,
           "%s: config->topk_groups = %d groups of %d experts leave fewer than topk (%d) selectable", what,
           c.topk_groups, c.experts / c.groups, c.topk);
    }
    if (c.selector.fn) {
      fail(Status::invalid_argument,
           "%s: config->groups = %d with config->selector set (%s); a router plugin chooses from all experts: "
           "groups must be <= 1",
           what, c.groups, c.selector.name ? c.selector.name : "a router plugin");
    }
  }
}

float router_aux_loss(const int64_t* selected, const double* psum, int experts, size_t tokens, int topk, float coeff) {
  if (tokens == 0) return 0.0f;
  const double tk = static_cast<double>(tokens) * static_cast<double>(topk), t = static_cast<double>(tokens);
  double acc = 0.0;
  for (int e = 0; e < experts; ++e) acc += (static_cast<double>(selected[e]) / tk) * (psum[e] / t);
  return static_cast<float>(static_cast<double>(coeff) * static_cast<double>(experts) * acc);
}

float router_z_loss(double zsum, size_t tokens, float coeff) {
  if (tokens == 0) return 0.0f;
  return static_cast<float>(static_cast<double>(coeff) * zsum / static_cast<double>(tokens));
}

float router_z_grad_scale(float grad_z, float coeff, size_t tokens) {
  if (tokens == 0) return 0.0f;
  return static_cast<float>(static_cast<double>(grad_z) * static_cast<double>(coeff) * 2.0 /
                            static_cast<double>(tokens));
}

void router_forward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, RouterOutputs& out) {
  check_router_config(c, dtype, "router_forward");
  const size_t E = static_cast<size_t>(c.experts), k = static_cast<size_t>(c.topk);
  const ops::RouterRowConfig rc = row_config(c, dtype);
  RowBuffers rb(c.experts, c.topk);
  std::vector<double> psum(E, 0.0), block(E, 0.0);
  double zsum = 0.0, zblock = 0.0;
  const std::vector<int32_t> chosen =
      c.selector.fn ? plugin_selection(logits, dtype, tokens, c, rc, rb, "router_forward") : std::vector<int32_t>();
  for (size_t t = 0; t < tokens; ++t) {
    row_forward(rc, row_of(logits, dtype, t, c.experts), c.bias, chosen, t, rb);
    for (size_t j = 0; j < k; ++j) {
      out.indices[t * k + j] = rb.r.idx[j];
      out.weights[t * k + j] = rb.r.w[j];
    }
    // The losses' sums: in token order within a block of kRouterLossBlock, then block by block.
    for (size_t e = 0; e < E; ++e) block[e] += static_cast<double>(rb.r.p[e]);
    const double lse = static_cast<double>(rb.r.state[2]);
    zblock += lse * lse;
    if ((t + 1) % ops::kRouterLossBlock == 0 || t + 1 == tokens) {
      for (size_t e = 0; e < E; ++e) {
        psum[e] += block[e];
        block[e] = 0.0;
      }
      zsum += zblock;
      zblock = 0.0;
    }
  }
  std::vector<int64_t> selected(E, 0), kept(E, 0);
  for (size_t s = 0; s < tokens * k; ++s) ++selected[static_cast<size_t>(out.indices[s])];
  if (c.drop != ops::kDropNone) {
    std::vector<char> keep;
    capacity_keep(c, tokens, out.indices, out.weights, keep);
    for (size_t s = 0; s < tokens * k; ++s) {
      if (keep[s]) continue;
      out.indices[s] = -1;
      out.weights[s] = 0.0f;
    }
  }
  for (size_t s = 0; s < tokens * k; ++s) {
    if (out.indices[s] >= 0) ++kept[static_cast<size_t>(out.indices[s])];
  }
  if (out.tokens_per_expert) std::copy(kept.begin(), kept.end(), out.tokens_per_expert);
  if (out.selected_per_expert) std::copy(selected.begin(), selected.end(), out.selected_per_expert);
  out.aux_loss = router_aux_loss(selected.data(), psum.data(), c.experts, tokens, c.topk, c.aux_loss_coeff);
  out.z_loss = router_z_loss(zsum, tokens, c.z_loss_coeff);
}

void router_backward(const void* logits, DType dtype, size_t tokens, const RouterConfig& c, const int32_t* indices,
                     const float* grad_weights, float grad_aux, float grad_z, float* grad_logits) {
  check_router_config(c, dtype, "router_backward");
  const size_t E = static_cast<size_t>(c.experts), k = static_cast<size_t>(c.topk);
  const ops::RouterRowConfig rc = row_config(c, dtype);
  RowBuffers rb(c.experts, c.topk);
  // The aux loss's f_e counts every selection before dropping: a first pass recomputes them.
  const bool aux = grad_aux != 0.0f && c.aux_loss_coeff != 0.0f;
  // A selector is asked again: its choice is a function of the scores (moe_router.h).
  const std::vector<int32_t> chosen =
      c.selector.fn ? plugin_selection(logits, dtype, tokens, c, rc, rb, "router_backward") : std::vector<int32_t>();
  std::vector<float> q;
  if (aux && tokens > 0) {
    std::vector<int64_t> selected(E, 0);
    if (!chosen.empty()) {
      for (int32_t e : chosen) ++selected[static_cast<size_t>(e)];
    }
    for (size_t t = 0; t < tokens && chosen.empty(); ++t) {
      ops::router_row_forward(rc, row_of(logits, dtype, t, c.experts), c.bias, rb.r);
      for (size_t j = 0; j < k; ++j) ++selected[static_cast<size_t>(rb.r.idx[j])];
    }
    q.resize(E);
    for (size_t e = 0; e < E; ++e) {
      q[e] = ops::router_aux_grad(grad_aux, c.aux_loss_coeff, c.experts, selected[e], tokens, c.topk);
    }
  }
  const float zscale = router_z_grad_scale(grad_z, c.z_loss_coeff, tokens);
  for (size_t t = 0; t < tokens; ++t) {
    const void* x = row_of(logits, dtype, t, c.experts);
    row_forward(rc, x, c.bias, chosen, t, rb);
    for (size_t j = 0; j < k; ++j) {
      const int32_t given = indices[t * k + j];
      if (given != -1 && given != rb.r.idx[j]) {
        fail(Status::invalid_argument,
             "router_backward: indices[%zu] = %d (token %zu, slot %zu); the forward pass selected expert %d there "
             "(or WEFT_MOE_DROPPED): pass the indices forward returned, with the same logits and config",
             t * k + j, static_cast<int>(given), t, j, static_cast<int>(rb.r.idx[j]));
      }
    }
    const float zl = zscale * rb.r.state[2];
    ops::router_row_backward(rc, x, grad_weights ? grad_weights + t * k : nullptr, indices + t * k,
                             q.empty() ? nullptr : q.data(), zl, rb.r, grad_logits + t * E);
  }
}

void router_update_bias(float* bias, const int64_t* load, int experts, float rate) {
  double sum = 0.0;
  for (int e = 0; e < experts; ++e) sum += static_cast<double>(load[e]);
  const double mean = sum / static_cast<double>(experts);
  for (int e = 0; e < experts; ++e) {
    const double l = static_cast<double>(load[e]);
    if (l < mean) bias[e] = bias[e] + rate;
    if (l > mean) bias[e] = bias[e] - rate;
  }
}

}  // namespace weft::kernels
