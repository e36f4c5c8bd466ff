// The MoE router's reference for tests/unit/test_moe_router.cpp, written from weft/moe.h alone
// and by another algorithm than kernels/cpu/moe_router: double precision throughout (std::exp,
// std::log), a full sort of the experts (and of the groups) per token with the tie rule written
// as the sort key, dropping by a full sort of each expert's assignments, and the gradient both
// from hand-derived closed forms and from central finite differences of the double loss.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "weft/weft.h"

namespace routerref {

struct Row {
  std::vector<double> x, s, p, sel;  // logits, scores, routing probabilities, selection scores
  std::vector<int> idx;              // the k experts before dropping, best first
  std::vector<double> w;             // their weights
  double lse = 0;
};

// Experts sorted by (score descending, index ascending): the order weft/moe.h states.
inline std::vector<int> sorted_by(const std::vector<double>& v, const std::vector<int>& among) {
  std::vector<int> o = among;
  std::sort(o.begin(), o.end(), [&](int a, int b) { return v[a] != v[b] ? v[a] > v[b] : a < b; });
  return o;
}

inline Row row(const std::vector<double>& x, const weft_router_config_t& c) {
  const int E = c.experts, k = c.topk;
  Row r;
  r.x = x;
  const double m = *std::max_element(x.begin(), x.end());
  double z = 0;
  for (double v : x) z += std::exp(v - m);
  r.lse = m + std::log(z);
  std::vector<double> soft(E), sig(E);
  for (int e = 0; e < E; ++e) {
    soft[e] = std::exp(x[e] - r.lse);
    sig[e] = 1.0 / (1.0 + std::exp(-x[e]));
  }
  const double sigsum = std::accumulate(sig.begin(), sig.end(), 0.0);
  r.s = c.score == WEFT_ROUTER_SOFTMAX ? soft : c.score == WEFT_ROUTER_SIGMOID ? sig : x;
  r.p = soft;
  if (c.score == WEFT_ROUTER_SIGMOID) {
    for (int e = 0; e < E; ++e) r.p[e] = sig[e] / sigsum;
  }
  r.sel = r.s;
  if (c.bias) {
    for (int e = 0; e < E; ++e) r.sel[e] += c.bias[e];
  }
  std::vector<int> allowed;
  if (c.groups > 1) {
    const int per = E / c.groups;
    std::vector<double> gscore(c.groups);
    std::vector<int> groups(c.groups);
    for (int g = 0; g < c.groups; ++g) {
      std::vector<int> members(per);
      std::iota(members.begin(), members.end(), g * per);
      const std::vector<int> o = sorted_by(r.sel, members);
      gscore[g] = per == 1 ? r.sel[o[0]] : r.sel[o[0]] + r.sel[o[1]];
      groups[g] = g;
    }
    const std::vector<int> go = sorted_by(gscore, groups);
    for (int n = 0; n < c.topk_groups; ++n) {
      for (int e = go[n] * per; e < (go[n] + 1) * per; ++e) allowed.push_back(e);
    }
  } else {
    allowed.resize(E);
    std::iota(allowed.begin(), allowed.end(), 0);
  }
  const std::vector<int> o = sorted_by(r.sel, allowed);
  r.idx.assign(o.begin(), o.begin() + k);
  r.w.resize(k);
  double total = 0;
  for (int j = 0; j < k; ++j) {
    r.w[j] = c.score == WEFT_ROUTER_TOPK_SOFTMAX ? std::exp(x[r.idx[j]]) : r.s[r.idx[j]];
    total += r.w[j];
  }
  if (c.score != WEFT_ROUTER_SOFTMAX || c.normalize) {
    for (double& w : r.w) w /= total;
  }
  return r;
}

// Dropping: which of the T*k slots (pre-drop experts idx, weights w as returned) stay.
inline std::vector<char> keep(const std::vector<int>& idx, const std::vector<float>& w, size_t T,
                              const weft_router_config_t& c) {
  const size_t k = static_cast<size_t>(c.topk);
  std::vector<char> kept(T * k, 1);
  if (c.drop == WEFT_DROP_NONE) return kept;
  const double cap = std::ceil(static_cast<double>(T) * c.topk / c.experts * c.capacity_factor);
  for (int e = 0; e < c.experts; ++e) {
    std::vector<size_t> mine;
    for (size_t s = 0; s < T * k; ++s) {
      if (idx[s] == e) mine.push_back(s);
    }
    if (c.drop == WEFT_DROP_BY_PROBABILITY) {
      std::sort(mine.begin(), mine.end(), [&](size_t a, size_t b) { return w[a] != w[b] ? w[a] > w[b] : a < b; });
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      if (static_cast<double>(i) >= cap) kept[mine[i]] = 0;
    }
  }
  return kept;
}

// The loss L = sum gw w + ga aux + gz z of logits X [T, E] with the selection `pre` (pre-drop
// experts) and `kept` held fixed: weights recomputed from X for the fixed experts.
struct Grads {
  std::vector<double> gw;  // [T*k], already 0 on dropped slots
  double ga = 0, gz = 0;
};

inline std::vector<double> counts(const std::vector<int>& pre, int E) {
  std::vector<double> f(E, 0.0);
  for (int e : pre) f[e] += 1;
  return f;
}

inline double loss(const std::vector<double>& X, size_t T, const weft_router_config_t& c, const std::vector<int>& pre,
                   const Grads& g) {
  const int E = c.experts, k = c.topk;
  const std::vector<double> sel = counts(pre, E);
  double L = 0, aux = 0, z = 0;
  for (size_t t = 0; t < T; ++t) {
    const std::vector<double> x(X.begin() + t * E, X.begin() + (t + 1) * E);
    Row r = row(x, c);  // for s, p, lse only: the selection is the fixed one
    double total = 0;
    std::vector<double> w(k);
    for (int j = 0; j < k; ++j) {
      const int e = pre[t * k + j];
      w[j] = c.score == WEFT_ROUTER_TOPK_SOFTMAX ? std::exp(x[e]) : r.s[e];
      total += w[j];
    }
    for (int j = 0; j < k; ++j) {
      if (c.score != WEFT_ROUTER_SOFTMAX || c.normalize) w[j] /= total;
      L += g.gw[t * k + j] * w[j];
    }
    for (int e = 0; e < E; ++e) aux += sel[e] / (double(T) * k) * r.p[e] / double(T);
    z += r.lse * r.lse / double(T);
  }
  return L + g.ga * c.aux_loss_coeff * E * aux + g.gz * c.z_loss_coeff * z;
}

// Central differences of loss() with step h per logit.
inline std::vector<double> finite_differences(const std::vector<double>& X, size_t T, const weft_router_config_t& c,
                                              const std::vector<int>& pre, const Grads& g, double h) {
  std::vector<double> out(X.size());
  std::vector<double> Y = X;
  for (size_t i = 0; i < X.size(); ++i) {
    Y[i] = X[i] + h;
    const double up = loss(Y, T, c, pre, g);
    Y[i] = X[i] - h;
    const double down = loss(Y, T, c, pre, g);
    Y[i] = X[i];
    out[i] = (up - down) / (2 * h);
  }
  return out;
}

// The closed forms (derived by hand from weft/moe.h's definitions):
//   weights: u_e = d(sum_j gw_j w_j)/d(score or logit), D = sum_j gw_j w_j:
//     SOFTMAX: d/dp_i = gw_j (no normalize) or (gw_j - D)/S over the k selected (S = sum of their p);
//     TOPK_SOFTMAX: d/dx_i = w_j (gw_j - D); SIGMOID: d/ds_i = (gw_j - D)/S.
//   aux: d/dp_e = ga coeff E f_e / T (f_e = selected / (T k)); for SIGMOID p = s / sum s, so
//     d/ds_e = (q_e - sum_f p_f q_f) / sum s.
//   softmax Jacobian: d/dx_e = p_e (G_e - sum_f p_f G_f); sigmoid: ds/dx = s (1 - s);
//   z: d/dx_e = gz coeff 2 lse softmax_e / T.
inline std::vector<double> closed_form(const std::vector<double>& X, size_t T, const weft_router_config_t& c,
                                       const std::vector<int>& pre, const Grads& g) {
  const int E = c.experts, k = c.topk;
  const std::vector<double> sel = counts(pre, E);
  std::vector<double> out(X.size(), 0.0);
  for (size_t t = 0; t < T; ++t) {
    const std::vector<double> x(X.begin() + t * E, X.begin() + (t + 1) * E);
    const Row r = row(x, c);
    std::vector<double> q(E);
    for (int e = 0; e < E; ++e) q[e] = g.ga * c.aux_loss_coeff * E * (sel[e] / (double(T) * k)) / double(T);
    std::vector<double> w(k);
    double S = 0, D = 0;
    for (int j = 0; j < k; ++j) {
      const int e = pre[t * k + j];
      w[j] = c.score == WEFT_ROUTER_TOPK_SOFTMAX ? std::exp(x[e]) : r.s[e];
      S += w[j];
    }
    const bool normalized = c.score != WEFT_ROUTER_SOFTMAX || c.normalize;
    for (int j = 0; j < k; ++j) {
      if (normalized) w[j] /= S;
      D += g.gw[t * k + j] * w[j];
    }
    std::vector<double> soft(E);
    for (int e = 0; e < E; ++e) soft[e] = std::exp(x[e] - r.lse);
    const double zl = g.gz * c.z_loss_coeff * 2 * r.lse / double(T);
    double* o = &out[t * E];
    if (c.score == WEFT_ROUTER_SIGMOID) {
      double sigsum = 0, pq = 0;
      for (int e = 0; e < E; ++e) sigsum += r.s[e];
      for (int e = 0; e < E; ++e) pq += r.p[e] * q[e];
      std::vector<double> G(E);
      for (int e = 0; e < E; ++e) G[e] = (q[e] - pq) / sigsum;
      double sk = 0;
      for (int j = 0; j < k; ++j) sk += r.s[pre[t * k + j]];
      for (int j = 0; j < k; ++j) G[pre[t * k + j]] += (g.gw[t * k + j] - D) / sk;
      for (int e = 0; e < E; ++e) o[e] = G[e] * r.s[e] * (1 - r.s[e]) + zl * soft[e];
      continue;
    }
    std::vector<double> G = q;
    if (c.score == WEFT_ROUTER_SOFTMAX) {
      for (int j = 0; j < k; ++j) {
        G[pre[t * k + j]] += normalized ? (g.gw[t * k + j] - D) / S : g.gw[t * k + j];
      }
    }
    double pg = 0;
    for (int e = 0; e < E; ++e) pg += soft[e] * G[e];
    for (int e = 0; e < E; ++e) o[e] = soft[e] * (G[e] - pg) + zl * soft[e];
    if (c.score == WEFT_ROUTER_TOPK_SOFTMAX) {
      for (int j = 0; j < k; ++j) o[pre[t * k + j]] += w[j] * (g.gw[t * k + j] - D);
    }
  }
  return out;
}

}  // namespace routerref
