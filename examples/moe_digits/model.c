/* Parameter shapes per layout and the layout-independent initialisation. */
#include "model.h"

#include <math.h>

static void set_shape(struct param *p, const char *name, int ndim, int64_t a, int64_t b, int64_t c) {
  p->name = name;
  p->ndim = ndim;
  p->shape[0] = a;
  p->shape[1] = b;
  p->shape[2] = c;
  p->count = (size_t)a * (size_t)(ndim > 1 ? b : 1) * (size_t)(ndim > 2 ? c : 1);
}

void model_shapes(struct model *m) {
  const int64_t fl = FFN / m->lay.tp, le = m->lay.local_experts;
  set_shape(&m->p[P_WIN], "Win", 2, IN_DIM, HIDDEN, 0);
  set_shape(&m->p[P_BIN], "bin", 1, HIDDEN, 0, 0);
  set_shape(&m->p[P_W1], "W1", 2, HIDDEN, fl, 0);
  set_shape(&m->p[P_B1], "b1", 1, fl, 0, 0);
  set_shape(&m->p[P_W2], "W2", 2, fl, HIDDEN, 0);
  set_shape(&m->p[P_B2], "b2", 1, HIDDEN, 0, 0);
  set_shape(&m->p[P_WR], "Wr", 2, HIDDEN, EXPERTS, 0);
  set_shape(&m->p[P_WE1], "We1", 3, le, HIDDEN, EXPERT_FFN);
  set_shape(&m->p[P_BE1], "be1", 2, le, EXPERT_FFN, 0);
  set_shape(&m->p[P_WE2], "We2", 3, le, EXPERT_FFN, HIDDEN);
  set_shape(&m->p[P_BE2], "be2", 2, le, HIDDEN, 0);
  set_shape(&m->p[P_WO], "Wo", 2, HIDDEN, CLASSES, 0);
  set_shape(&m->p[P_BO], "bo", 1, CLASSES, 0, 0);
}

/* splitmix64: a stateless hash, so an element's value never depends on which rank draws it. */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The global index of local element i: only the sharded tensors differ from i. */
static uint64_t global_index(const struct model *m, int id, size_t i) {
  const size_t t = (size_t)m->lay.tp_rank, fl = (size_t)(FFN / m->lay.tp);
  switch (id) {
    case P_W1: return (i / fl) * FFN + t * fl + i % fl; /* columns [t*fl, (t+1)*fl) of [H, F] */
    case P_B1:
    case P_W2: return t * m->p[id].count + i;           /* rows of [F, H] / entries of [F] */
    case P_WE1:
    case P_BE1:
    case P_WE2:
    case P_BE2: return t * m->p[id].count + i;          /* experts [t*L, (t+1)*L) */
    default: return i;
  }
}

void model_init_values(const struct model *m, int id, float *out) {
  /* Weights ~ U(-a, a) with variance 1/fan_in (a = sqrt(3/fan_in)); the matrices that write into
   * the residual stream and the router start smaller, so the untrained net is near identity. */
  double fan_in = 0.0, gain = 1.0;
  switch (id) {
    case P_WIN: fan_in = IN_DIM; break;
    case P_W1: fan_in = HIDDEN; break;
    case P_W2: fan_in = FFN; gain = 0.5; break;
    case P_WR: fan_in = HIDDEN; gain = 0.5; break;
    case P_WE1: fan_in = HIDDEN; break;
    case P_WE2: fan_in = EXPERT_FFN; gain = 0.5; break;
    case P_WO: fan_in = HIDDEN; break;
    default: break; /* biases start at zero */
  }
  for (size_t i = 0; i < m->p[id].count; ++i) {
    if (fan_in == 0.0) {
      out[i] = 0.0f;
      continue;
    }
    const uint64_t h = mix(mix(0x5eed0017ull + (uint64_t)id) ^ global_index(m, id, i));
    const double u = (double)(h >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    out[i] = (float)(gain * sqrt(3.0 / fan_in) * (2.0 * u - 1.0));
  }
}
