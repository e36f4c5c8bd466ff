#include "moe_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace mpt::moe {
namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A value in [-1, 1) on a 2^-11 grid (12 significant bits; make_data rounds token data to dtype).
float uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  const uint64_t h = mix(mix(seed, stream), i);
  return static_cast<float>(static_cast<int64_t>(h >> 52) - 2048) / 2048.0f;
}

uint16_t bf16_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

float activate(Act a, float h) { return a == Act::relu ? (h > 0.0f ? h : 0.0f) : std::tanh(h); }
float activate_grad(Act a, float h, float y) { return a == Act::relu ? (h > 0.0f ? 1.0f : 0.0f) : 1.0f - y * y; }

}  // namespace

size_t slice_begin(size_t tokens, int nranks, int r) {
  return tokens * static_cast<size_t>(r) / static_cast<size_t>(nranks);
}

int chunk_rank(int experts, int nranks, int e) {
  const int c = (experts + nranks - 1) / nranks;
  return e / c;
}

float round_to(weft_dtype_t dt, float v) { return dt == WEFT_BFLOAT16 ? bf16_value(bf16_bits(v)) : v; }

std::vector<unsigned char> to_bytes(weft_dtype_t dt, const float* v, size_t n) {
  std::vector<unsigned char> b(n * (dt == WEFT_BFLOAT16 ? 2 : 4));
  for (size_t i = 0; i < n; ++i) {
    if (dt == WEFT_BFLOAT16) {
      const uint16_t h = bf16_bits(v[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(b.data() + 4 * i, &v[i], 4);
    }
  }
  return b;
}

std::vector<float> from_bytes(weft_dtype_t dt, const void* src, size_t n) {
  std::vector<float> v(n);
  const auto* b = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {
    if (dt == WEFT_BFLOAT16) {
      uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      v[i] = bf16_value(h);
    } else {
      std::memcpy(&v[i], b + 4 * i, 4);
    }
  }
  return v;
}

Data make_data(const Problem& p, int nranks) {
  const size_t T = p.tokens, H = p.hidden, F = p.ffn, E = static_cast<size_t>(p.experts), k = static_cast<size_t>(p.topk);
  Data d;
  d.x.resize(T * H);
  d.grad_out.resize(T * H);
  for (size_t i = 0; i < T * H; ++i) {
    d.x[i] = round_to(p.dtype, uniform(p.seed, 1, i));
    d.grad_out[i] = round_to(p.dtype, uniform(p.seed, 2, i));
  }
  d.w1.resize(E * H * F);
  d.w2.resize(E * F * H);
  for (size_t i = 0; i < d.w1.size(); ++i) d.w1[i] = uniform(p.seed, 3, i) * 0.5f;
  for (size_t i = 0; i < d.w2.size(); ++i) d.w2[i] = uniform(p.seed, 4, i) * 0.5f;
  d.index.assign(T * k, -1);
  d.weight.assign(T * k, 0.0f);
  for (size_t t = 0; t < T; ++t) {
    // The experts this token may choose, shuffled by the seed; k distinct ones taken in order.
    std::vector<int> pool;
    int own = 0;
    for (int r = 0; r < nranks; ++r) {
      if (t >= slice_begin(T, nranks, r) && t < slice_begin(T, nranks, r + 1)) own = r;
    }
    for (int e = 0; e < p.experts; ++e) {
      const int r = chunk_rank(p.experts, nranks, e);
      if (p.routing == "local" && r != own) continue;
      if (p.routing == "skip_last" && r == nranks - 1 && nranks > 1) continue;
      pool.push_back(e);
    }
    for (size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[mix(mix(p.seed, 5), t * 131 + i) % i]);
    for (size_t j = 0; j < k; ++j) {
      const bool drop = p.routing == "dropped" || j >= pool.size() || mix(mix(p.seed, 6), t * k + j) % 7 == 0;
      if (drop) continue;
      d.index[t * k + j] = pool[j];
      d.weight[t * k + j] = 0.125f + (uniform(p.seed, 7, t * k + j) + 1.0f) * 0.5f;
    }
  }
  return d;
}

void expert_forward(const Problem& p, const Data& d, int e, const float* x, float* y) {
  const size_t H = p.hidden, F = p.ffn;
  const float* w1 = d.w1.data() + static_cast<size_t>(e) * H * F;
  const float* w2 = d.w2.data() + static_cast<size_t>(e) * F * H;
  std::vector<float> a(F);
  for (size_t f = 0; f < F; ++f) {
    float h = 0.0f;
    for (size_t i = 0; i < H; ++i) h = h + x[i] * w1[i * F + f];
    a[f] = activate(p.act, h);
  }
  for (size_t o = 0; o < H; ++o) {
    float acc = 0.0f;
    for (size_t f = 0; f < F; ++f) acc = acc + a[f] * w2[f * H + o];
    y[o] = round_to(p.dtype, acc);
  }
}

void expert_backward(const Problem& p, const Data& d, int e, const float* x, const float* dy, float* dx, float* dw1,
                     float* dw2) {
  const size_t H = p.hidden, F = p.ffn;
  const float* w1 = d.w1.data() + static_cast<size_t>(e) * H * F;
  const float* w2 = d.w2.data() + static_cast<size_t>(e) * F * H;
  std::vector<float> h(F), a(F), dh(F);
  for (size_t f = 0; f < F; ++f) {
    float s = 0.0f;
    for (size_t i = 0; i < H; ++i) s = s + x[i] * w1[i * F + f];
    h[f] = s;
    a[f] = activate(p.act, s);
  }
  for (size_t f = 0; f < F; ++f) {
    float da = 0.0f;
    for (size_t o = 0; o < H; ++o) da = da + w2[f * H + o] * dy[o];
    dh[f] = da * activate_grad(p.act, h[f], a[f]);
    for (size_t o = 0; o < H; ++o) dw2[f * H + o] = dw2[f * H + o] + a[f] * dy[o];
  }
  for (size_t i = 0; i < H; ++i) {
    float s = 0.0f;
    for (size_t f = 0; f < F; ++f) {
      s = s + w1[i * F + f] * dh[f];
      dw1[i * F + f] = dw1[i * F + f] + x[i] * dh[f];
    }
    dx[i] = round_to(p.dtype, s);
  }
}

Result reference(const Problem& p, const Data& d) {
  const size_t T = p.tokens, H = p.hidden, F = p.ffn, E = static_cast<size_t>(p.experts), k = static_cast<size_t>(p.topk);
  Result r;
  r.out.assign(T * H, 0.0f);
  r.grad_x.assign(T * H, 0.0f);
  r.grad_w.assign(T * k, 0.0f);
  r.dw1.assign(E * H * F, 0.0f);
  r.dw2.assign(E * F * H, 0.0f);
  std::vector<float> y(H), dy(H), dx(H), acc(H), gacc(H);
  for (size_t t = 0; t < T; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    std::fill(gacc.begin(), gacc.end(), 0.0f);
    const float* g = d.grad_out.data() + t * H;
    for (size_t j = 0; j < k; ++j) {
      const int e = d.index[t * k + j];
      if (e < 0) continue;
      const float w = d.weight[t * k + j];
      expert_forward(p, d, e, d.x.data() + t * H, y.data());
      float dot = 0.0f;
      for (size_t i = 0; i < H; ++i) {
        const float prod = w * y[i];
        acc[i] = acc[i] + prod;
        const float gy = g[i] * y[i];
        dot = dot + gy;
        dy[i] = round_to(p.dtype, w * g[i]);
      }
      r.grad_w[t * k + j] = dot;
      expert_backward(p, d, e, d.x.data() + t * H, dy.data(), dx.data(), r.dw1.data() + static_cast<size_t>(e) * H * F,
                      r.dw2.data() + static_cast<size_t>(e) * F * H);
      for (size_t i = 0; i < H; ++i) gacc[i] = gacc[i] + dx[i];
    }
    for (size_t i = 0; i < H; ++i) {
      r.out[t * H + i] = round_to(p.dtype, acc[i]);
      r.grad_x[t * H + i] = round_to(p.dtype, gacc[i]);
    }
  }
  return r;
}

}  // namespace mpt::moe
