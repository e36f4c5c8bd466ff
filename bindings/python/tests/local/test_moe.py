"""weft/moe.h through the binding in one process: the router against a float64 numpy/torch
reference written here (selection, weights, dropping, counts, losses, backward), the bias
update and the dispatch layout against brute force, one-rank dispatch / combine /
combine_backward against dense numpy (float32, bfloat16, fp8 dispatch within moe.h's bound), bad
input refused with a clear error, and weft.torch_moe's MoELayer (torch and weft routers) against
plain torch autograd.

WEFT_TEST_INJECT=1 corrupts one value before each comparison (check()), which must then fail.
"""

import numpy as np
import pytest
import torch

import weft
from weft import _lib

from _helpers import inject_enabled

# A library built before moe.h (test_local.py's test_every_function_declared fails for it).
needs_router = pytest.mark.skipif(not _lib.has("weft_router_forward"), reason="the loaded libweft lacks the router")
needs_moe = pytest.mark.skipif(not _lib.has("weft_moe_dispatch"), reason="the loaded libweft lacks moe dispatch")


def check(what, got, ref, rtol=0.0):
    """got equals ref (exactly, or within rtol of max|ref|); under WEFT_TEST_INJECT=1 one value
    of a copy of got is moved first and the comparison must fail."""
    g = np.array(got, dtype=np.float64, copy=True)
    r = np.asarray(ref, dtype=np.float64)
    assert g.shape == r.shape, (what, g.shape, r.shape)
    scale = max(float(np.max(np.abs(r))) if r.size else 0.0, 1e-30)

    def ok(a):
        return bool(np.all(np.abs(a - r) <= rtol * scale)) if rtol else bool(np.array_equal(a, r))

    if inject_enabled() and g.size:
        g.flat[g.size // 2] += max(1.0, 10 * rtol * scale)
        assert not ok(g), "%s: the injected corruption was not caught" % what
        print("INJECT %s: caught" % what)
        return
    assert ok(g), "%s:\n got %s\n ref %s" % (what, g, r)


# ------------------------------------------------------------------ the reference router

def _order(scores):
    """Expert indices by decreasing score, ties to the lower index."""
    return sorted(range(len(scores)), key=lambda e: (-scores[e], e))


def ref_route(logits, e, k, score="softmax", normalize=False, groups=0, topk_groups=0, bias=None, drop="none",
              cf=1.0, aux=0.0, z=0.0):
    lg = np.asarray(logits, np.float64)
    t = lg.shape[0]
    ex = np.exp(lg - lg.max(axis=1, keepdims=True))
    p = ex / ex.sum(axis=1, keepdims=True)
    sig = 1.0 / (1.0 + np.exp(-lg))
    base = {"softmax": p, "topk_softmax": lg, "sigmoid": sig}[score]
    b = np.zeros(e) if bias is None else np.asarray(bias, np.float64)
    idx = np.zeros((t, k), np.int64)
    w = np.zeros((t, k))
    for i in range(t):
        sel = base[i] + b
        allowed = np.ones(e, bool)
        if groups > 1:
            size = e // groups
            gs = [sum(sorted(sel[g * size:(g + 1) * size], reverse=True)[:min(2, size)]) for g in range(groups)]
            allowed[:] = False
            for g in _order(gs)[:topk_groups]:
                allowed[g * size:(g + 1) * size] = True
        masked = [sel[j] if allowed[j] else -np.inf for j in range(e)]
        chosen = _order(masked)[:k]
        idx[i] = chosen
        if score == "softmax":
            w[i] = p[i, chosen] / (p[i, chosen].sum() if normalize else 1.0)
        elif score == "topk_softmax":
            v = np.exp(lg[i, chosen] - lg[i, chosen].max())
            w[i] = v / v.sum()
        else:
            w[i] = sig[i, chosen] / sig[i, chosen].sum()
    selected = np.bincount(idx.ravel(), minlength=e)
    if drop != "none":
        cap = int(np.ceil(t * k / e * cf))
        for x in range(e):
            slots = [(i, j) for i in range(t) for j in range(k) if idx[i, j] == x]
            if drop == "by_probability":
                slots.sort(key=lambda s: (-w[s], s[0]))
            for s in slots[cap:]:
                idx[s], w[s] = -1, 0.0
    kept = np.bincount(idx[idx >= 0].ravel(), minlength=e)
    prob = p if score != "sigmoid" else sig / sig.sum(axis=1, keepdims=True)
    aux_loss = aux * e * float(np.sum(selected / (t * k) * prob.mean(axis=0)))
    lse = lg.max(axis=1) + np.log(np.exp(lg - lg.max(axis=1, keepdims=True)).sum(axis=1))
    z_loss = z * float(np.mean(lse ** 2))
    return idx, w, kept, selected, aux_loss, z_loss


def ref_router_grad(logits, idx, gw, e, score, normalize, ga, gz, aux, z, selected):
    """The float64 autograd gradient of sum(gw * w) + ga * aux + gz * z, the selection fixed."""
    lg = torch.tensor(np.asarray(logits, np.float64), requires_grad=True)
    t, k = idx.shape
    p = torch.softmax(lg, dim=1)
    sig = torch.sigmoid(lg)
    keep = torch.tensor(idx >= 0)
    ix = torch.tensor(np.where(idx >= 0, idx, 0).astype(np.int64))
    if score == "softmax":
        w = p.gather(1, ix)
        if normalize:
            w = w / w.sum(dim=1, keepdim=True)
    elif score == "topk_softmax":
        w = torch.softmax(lg.gather(1, ix), dim=1)
    else:
        s = sig.gather(1, ix)
        w = s / s.sum(dim=1, keepdim=True)
    loss = (torch.where(keep, w, torch.zeros_like(w)) * torch.tensor(gw, dtype=torch.float64)).sum()
    f = torch.tensor(np.asarray(selected) / (t * k))  # the selections before dropping (fixed)
    prob = p if score != "sigmoid" else sig / sig.sum(dim=1, keepdim=True)
    loss = loss + ga * aux * e * (f * prob.mean(dim=0)).sum()
    loss = loss + gz * z * (torch.logsumexp(lg, dim=1) ** 2).mean()
    loss.backward()
    return lg.grad.numpy()


def _logits(t, e, seed):
    """Logits with distinct, well separated values per row (no near-ties between experts), and a
    different spread per row (no near-ties between tokens' weights, for dropping by probability)."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.permutation(e) * (0.2 + 0.07 * i) - 1.1 + rng.uniform(0, 0.05)
                     for i in range(t)]).astype(np.float32)


ROUTER_CASES = [
    dict(e=8, k=1), dict(e=8, k=2), dict(e=6, k=4, normalize=True), dict(e=8, k=2, score="topk_softmax"),
    dict(e=8, k=3, score="sigmoid"), dict(e=8, k=2, groups=4, topk_groups=2),
    dict(e=6, k=2, score="sigmoid", groups=3, topk_groups=1),
    dict(e=8, k=2, bias=[0.0, 0.5, 0.0, 0.0, -0.3, 0.0, 0.9, 0.0]),
    dict(e=4, k=2, drop="by_position", cf=1.0), dict(e=4, k=1, drop="by_probability", cf=0.5),
    dict(e=8, k=2, aux=0.01, z=0.001), dict(e=6, k=2, score="sigmoid", aux=0.1),
]


def _options(c):
    return dict(score=c.get("score", "softmax"), normalize=c.get("normalize", False), groups=c.get("groups", 0),
                topk_groups=c.get("topk_groups", 0), bias=c.get("bias"), drop=c.get("drop", "none"),
                capacity_factor=c.get("cf", 1.0), aux_loss_coeff=c.get("aux", 0.0), z_loss_coeff=c.get("z", 0.0))


@needs_router
@pytest.mark.parametrize("case", ROUTER_CASES,
                         ids=lambda c: "-".join("%s%s" % kv for kv in c.items() if kv[0] != "bias"))
def test_router_forward(case):
    t, e, k = 12, case["e"], case["k"]
    logits = _logits(t, e, 7 + e + k)
    r = weft.route(logits, e, k, **_options(case))
    idx, w, kept, selected, aux, z = ref_route(logits, e, k, **{a: b for a, b in case.items() if a not in ("e", "k")})
    check("indices", r.indices, idx)
    check("weights", r.weights, w, 1e-6)
    check("tokens_per_expert", r.tokens_per_expert, kept)
    check("selected_per_expert", r.selected_per_expert, selected)
    check("aux_loss", [r.aux_loss], [aux], 1e-5)
    check("z_loss", [r.z_loss], [z], 1e-5)
    assert r.indices.dtype == np.int32 and r.weights.dtype == np.float32


@needs_router
def test_router_ties_go_to_the_lower_index():
    logits = np.zeros((3, 6), np.float32)
    logits[1, [2, 4]] = 1.0
    r = weft.route(logits, 6, 2)
    check("tie indices", r.indices, [[0, 1], [2, 4], [0, 1]])


@needs_router
def test_router_torch_and_bfloat16_logits():
    logits = _logits(5, 8, 3)
    ref = weft.route(logits, 8, 2)
    got = weft.route(torch.from_numpy(logits), 8, 2)
    check("torch logits indices", got.indices, ref.indices)
    bf = torch.from_numpy(logits).to(torch.bfloat16)
    r = weft.route(bf, 8, 2)
    idx, w, *_ = ref_route(bf.float().numpy(), 8, 2)
    check("bfloat16 indices", r.indices, idx)
    check("bfloat16 weights", r.weights, w, 1e-6)


@needs_router
@pytest.mark.parametrize("case", [
    dict(e=8, k=2), dict(e=6, k=4, normalize=True), dict(e=8, k=2, score="topk_softmax"),
    dict(e=8, k=3, score="sigmoid"), dict(e=8, k=2, aux=0.01, z=0.001), dict(e=6, k=2, score="sigmoid", aux=0.1),
    dict(e=4, k=2, drop="by_position", cf=0.75),
], ids=str)
def test_router_backward(case):
    t, e, k = 10, case["e"], case["k"]
    logits = _logits(t, e, 11 + e)
    opts = _options(case)
    r = weft.route(logits, e, k, **opts)
    gw = np.random.default_rng(5).standard_normal((t, k)).astype(np.float32)
    ga, gz = 0.7, 1.3
    got = weft.router_backward(logits, r.indices, gw, e, k, grad_aux=ga, grad_z=gz, **opts)
    selected = ref_route(logits, e, k, **{a: b for a, b in case.items() if a not in ("e", "k")})[3]
    ref = ref_router_grad(logits, r.indices, gw, e, opts["score"], opts["normalize"], ga, gz, opts["aux_loss_coeff"],
                          opts["z_loss_coeff"], selected)
    check("grad_logits", got, ref, 1e-5)


@needs_router
def test_update_bias():
    bias = np.array([0.0, 0.25, -0.5, 1.0], np.float32)
    load = np.array([3, 5, 4, 4], np.int64)  # mean 4
    ref = bias + np.float32(0.125) * np.array([1, -1, 0, 0], np.float32)
    out = weft.update_bias(bias, load, 0.125)
    assert out is bias
    check("bias", bias, ref)


@needs_moe
def test_layout_against_brute_force():
    rng = np.random.default_rng(2)
    t, k, e, n = 9, 3, 6, 4
    idx = np.stack([rng.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
    idx[2, 1] = idx[5, 0] = weft.DROPPED
    expert_rank = np.array([3, 0, 0, 2, 1, 3], np.int32)
    for er in (None, expert_rank):
        owner = [(x // -(-e // n)) if er is None else int(er[x]) for x in range(e)]
        tin = np.zeros((t, n), bool)
        tpe = np.zeros(e, np.int64)
        for i in range(t):
            for j in range(k):
                if idx[i, j] >= 0:
                    tin[i, owner[idx[i, j]]] = True
                    tpe[idx[i, j]] += 1
        out = weft.layout(idx, e, n, expert_rank=er)
        check("token_in_rank", out.token_in_rank, tin)
        check("tokens_per_expert", out.tokens_per_expert, tpe)
        check("tokens_per_rank", out.tokens_per_rank, tin.sum(axis=0))


# ------------------------------------------------------------------ one rank: dispatch / combine

@pytest.fixture()
def solo():
    with weft.Comm(weft.get_unique_id(), 0, 1, timeout=30, name="solo") as c:
        yield c


def _dense(x, idx, w, f, weighted=True):
    """out[t] = float32 sum in slot order of w * f(expert, x[t]) over kept slots, from 0."""
    out = np.zeros_like(x)
    for j in range(idx.shape[1]):
        kept = idx[:, j] >= 0
        y = np.stack([f(int(e), x[i]) if e >= 0 else np.zeros_like(x[i]) for i, e in enumerate(idx[:, j])])
        wj = w[:, j:j + 1] if weighted else np.ones_like(w[:, j:j + 1])
        out = np.where(kept[:, None], out + wj * y, out).astype(np.float32)
    return out


@needs_moe
@pytest.mark.parametrize("e,k,align", [(8, 1, 0), (8, 2, 0), (6, 4, 4)])
def test_one_rank_dispatch_combine_equals_dense(solo, e, k, align):
    t, h = 11, 5
    rng = np.random.default_rng(e * 10 + k)
    x = rng.standard_normal((t, h)).astype(np.float32)
    idx = np.stack([rng.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
    idx[3, 0] = weft.DROPPED
    w = rng.uniform(0.1, 1.0, (t, k)).astype(np.float32)
    scale = np.arange(1, e + 1, dtype=np.float32)  # expert e multiplies by e + 1

    with weft.Moe(solo, e, h, "float32", expert_alignment=align) as moe, moe.dispatch(x, idx, w) as hd:
        check("local experts", hd.experts, np.arange(e))
        kept = [(i, j) for i in range(t) for j in range(k) if idx[i, j] >= 0]
        counts = [sum(1 for i, j in kept if idx[i, j] == x_) for x_ in range(e)]
        check("counts", hd.counts, counts)
        pad = [(-(-c // align) * align if align > 1 else c) for c in counts]
        check("offsets", hd.offsets, np.concatenate([[0], np.cumsum(pad)]))
        # Expert-major, then token: the rows and their bookkeeping.
        exp_rows = []
        for x_ in range(e):
            rows = [(i, j) for i, j in kept if idx[i, j] == x_]
            exp_rows += rows + [None] * (pad[x_] - counts[x_])
        check("rows", [hd.rows], [len(exp_rows)])
        tokens = hd.tokens
        ref_tokens = np.stack([x[s[0]] if s else np.zeros(h, np.float32) for s in exp_rows])
        check("received tokens", tokens, ref_tokens)
        check("row_expert", hd.row_expert, [idx[s] if s else -1 for s in exp_rows])
        check("row_weight", hd.row_weight, [w[s] if s else 0.0 for s in exp_rows])
        check("row_source_token (real rows)", [hd.row_source_token[r] for r, s in enumerate(exp_rows) if s],
              [s[0] for s in exp_rows if s])
        check("row_source_rank (real rows)", [hd.row_source_rank[r] for r, s in enumerate(exp_rows) if s],
              [0] * len(kept))
        expert_out = (tokens * scale[np.maximum(hd.row_expert, 0)][:, None]).astype(np.float32)
        out = moe.combine(hd, expert_out)
        check("combine", out, _dense(x, idx, w, lambda ex, row: row * scale[ex]))
        out1 = moe.combine(hd, expert_out, weighted=False)
        check("combine unweighted", out1, _dense(x, idx, w, lambda ex, row: row * scale[ex], weighted=False))
        moe.combine(hd, expert_out)  # combine_backward uses the last combine's expert outputs
        g = rng.standard_normal((t, h)).astype(np.float32)
        gy, gw = moe.combine_backward(hd, g)
        ref_gy = np.stack([w[s] * g[s[0]] if s else np.zeros(h, np.float32) for s in exp_rows]).astype(np.float32)
        check("grad_expert_out", gy, ref_gy)
        ref_gw = np.zeros((t, k), np.float32)
        for r, s in enumerate(exp_rows):
            if s:
                acc = np.float32(0)
                for q in range(h):  # float32, in element order
                    acc = np.float32(acc + np.float32(g[s[0], q] * expert_out[r, q]))
                ref_gw[s] = acc
        check("grad_weights", gw, ref_gw)


@needs_moe
def test_torch_tensors_in_and_out(solo):
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    idx = torch.tensor([[1], [0], [1], [-1]], dtype=torch.int32)
    w = torch.tensor([[0.5], [2.0], [1.0], [0.0]])
    with weft.Moe(solo, 2, 3) as moe, moe.dispatch(x, idx, w) as hd:
        assert isinstance(hd.tokens, torch.Tensor)
        check("torch received", hd.tokens, x[[1, 0, 2]])
        out = moe.combine(hd, hd.tokens.clone())
        assert isinstance(out, torch.Tensor)
        check("torch combine", out, torch.stack([x[0] * 0.5, x[1] * 2.0, x[2], torch.zeros(3)]))


@needs_moe
def test_bad_input_is_refused(solo):
    x = np.zeros((3, 4), np.float32)
    w = np.ones((3, 1), np.float32)
    with weft.Moe(solo, 4, 4) as moe:
        with pytest.raises(weft.InvalidArgument, match="index|expert|indices"):
            moe.dispatch(x, np.array([[0], [4], [1]], np.int32), w)
        with pytest.raises(weft.InvalidArgument, match="NaN|nan|weight"):
            moe.dispatch(x, np.array([[0], [1], [2]], np.int32), np.array([[1], [np.nan], [1]], np.float32))
        with pytest.raises(weft.InvalidArgument, match="shape"):
            moe.dispatch(np.zeros((3, 5), np.float32), np.zeros((3, 1), np.int32), w)
        with pytest.raises(weft.InvalidArgument, match="k|topk|expert"):
            moe.dispatch(x, np.zeros((3, 5), np.int32), np.ones((3, 5), np.float32))
        with pytest.raises(weft.InvalidArgument, match="float64|dtype"):
            moe.dispatch(x.astype(np.float64), np.zeros((3, 1), np.int32), w)
        with moe.dispatch(x, np.zeros((3, 1), np.int32), w) as hd:
            with pytest.raises(weft.InvalidArgument, match="expert_out"):
                moe.combine(hd, np.zeros((hd.rows + 1, 4), np.float32))
        with pytest.raises(weft.InvalidArgument, match="closed"):
            hd.tokens


@needs_router
def test_router_bad_input_is_refused():
    with pytest.raises(weft.InvalidArgument):
        weft.route(np.zeros((2, 4), np.float32), 4, 5)  # k > E
    with pytest.raises(weft.InvalidArgument):
        weft.route(np.zeros((2, 3), np.float32), 4, 1)  # logits are not [T, E]
    with pytest.raises(weft.InvalidArgument, match="score"):
        weft.RouterConfig(4, 1, score="cosine")


@needs_moe
def test_bfloat16_tokens_round_once(solo):
    rng = np.random.default_rng(9)
    x = torch.from_numpy(rng.standard_normal((6, 4)).astype(np.float32)).to(torch.bfloat16)
    idx = torch.tensor([[0, 2], [1, 0], [2, 1], [0, 1], [2, 0], [1, 2]], dtype=torch.int32)
    w = torch.from_numpy(rng.uniform(0.1, 1.0, (6, 2)).astype(np.float32))
    with weft.Moe(solo, 3, 4, "bfloat16") as moe, moe.dispatch(x, idx, w) as hd:
        assert hd.tokens.dtype == torch.bfloat16
        rows = hd.tokens.clone()
        out = moe.combine(hd, rows)
        assert out.dtype == torch.bfloat16
        xf, wn = x.float().numpy(), w.numpy()
        acc = np.zeros((6, 4), np.float32)
        for j in range(2):  # float32 in slot order, then one rounding to bfloat16 (torch: nearest even)
            acc = acc + wn[:, j:j + 1] * xf
        check("bfloat16 combine", out.float(), torch.from_numpy(acc).to(torch.bfloat16).float())


@needs_moe
def test_fp8_dispatch_within_the_e4m3_bound(solo):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((8, 16)) * rng.uniform(0.01, 100, (8, 1))).astype(np.float32)
    idx = rng.integers(0, 4, (8, 1)).astype(np.int32)
    with weft.Moe(solo, 4, 16, fp8_dispatch=True) as moe, moe.dispatch(x, idx, np.ones((8, 1), np.float32)) as hd:
        src = x[hd.row_source_token]
        scale = np.abs(src).max(axis=1, keepdims=True) / 448.0
        bound = np.abs(src) * 2.0 ** -4 + scale * 2.0 ** -10  # moe.h's E4M3 bound
        err = np.abs(hd.tokens.astype(np.float64) - src)
        if inject_enabled():
            err.flat[err.size // 2] += 2 * bound.flat[err.size // 2] + 1
            assert not np.all(err <= bound), "fp8 bound: the injected corruption was not caught"
            return
        assert np.all(err <= bound), float(np.max(err - bound))
        assert np.any(err > 0)  # the tokens did travel as fp8


# ------------------------------------------------------------------ weft.torch_moe on one rank

@needs_moe
@needs_router
@pytest.mark.parametrize("router", ["torch", "weft"])
def test_torch_moe_layer_one_rank(solo, router):
    """MoELayer (with weft's router: its aux loss in the loss, so Route's backward carries
    grad_aux) against plain torch autograd over the same parameters, within float32 rounding."""
    from weft.torch_moe import MoELayer, init_parameters
    e, h, f, k, t, coeff = 6, 5, 7, 2, 9, 0.05
    x0 = torch.from_numpy(np.random.default_rng(1).standard_normal((t, h)).astype(np.float32))
    g = torch.from_numpy(np.random.default_rng(2).standard_normal((t, h)).astype(np.float32))
    with weft.Moe(solo, e, h) as moe:
        opts = dict(aux_loss_coeff=coeff) if router == "weft" else {}
        layer = MoELayer(moe, f, k, seed=4, router=router, normalize=True, **opts)
        x = x0.clone().requires_grad_(True)
        loss = (layer(x) * g).sum() + (layer.aux_loss if router == "weft" else 0.0)
        loss.backward()
    p = {n: v.clone().requires_grad_(True) for n, v in init_parameters(e, h, f, 4).items()}
    xr = x0.clone().requires_grad_(True)
    probs = torch.softmax(xr @ p["router"].t(), dim=1)
    idx = torch.topk(probs, k, dim=1).indices  # well separated here: the same choice as weft's router
    w = probs.gather(1, idx)
    w = w / w.sum(dim=1, keepdim=True)
    out = torch.zeros_like(xr)
    for j in range(k):
        for i in range(t):
            q = int(idx[i, j])
            y = torch.relu(xr[i:i + 1] @ p["w1"][q] + p["b1"][q]) @ p["w2"][q] + p["b2"][q]
            out = out + torch.nn.functional.pad(w[i, j] * y, (0, 0, i, t - i - 1))
    ref_loss = (out * g).sum()
    if router == "weft":
        frac = torch.bincount(idx.ravel(), minlength=e).float() / (t * k)
        ref_loss = ref_loss + coeff * e * (frac * probs.mean(dim=0)).sum()
    ref_loss.backward()
    check("%s router: loss" % router, [float(loss)], [float(ref_loss)], 1e-5)
    check("%s router: grad x" % router, x.grad, xr.grad, 1e-5)
    check("%s router: grad router" % router, layer.router.grad, p["router"].grad, 1e-5)
    for q in range(e):
        for n in ("w1", "b1", "w2", "b2"):
            check("%s router: grad %s of expert %d" % (router, n, q), layer.experts["%s_%d" % (n, q)].grad,
                  p[n].grad[q], 1e-5)
