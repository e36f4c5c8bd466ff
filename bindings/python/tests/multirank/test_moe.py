"""The torch MoE layer (weft.torch_moe.MoELayer) expert-parallel over the ranks of a weftrun job
equals one process computing the same layer densely, BITWISE in float32, forward and backward:
the output, the gradient of x, of the router's weight (summed over ranks in rank order) and of
every expert's weights, for top-k 1, 2 and 4 with E = 8 and E = 6 (E = 6 on 4 ranks: ranks
0..2 hold two experts each, rank 3 none), with torch's top-k router and with weft's router
(capacity dropping), with a rank that has no tokens and with padded expert rows; dispatch's
bookkeeping across ranks; one rank's bad input failing every rank.

Why bitwise equality holds (and is demanded):
  * the expert math is row-independent and sees the same operands in the same shapes: expert e
    receives, on its rank, exactly the rows the reference gathers for it (tokens in (source
    rank, token) order, one per token), so its matmuls run on identical [n_e, H] inputs and
    their summation orders are the same; the weight gradients (x^T dy, dy.sum(0)) likewise;
  * the router runs per rank on that rank's tokens in both computations (same shapes);
  * combine sums a token's k slots in float32 in slot order from 0 (weft/moe.h), which the
    reference does in numpy with the same operations; its backward's grad_weights is the float32
    dot product in element order, done here the same way; the gradient of x is the router's part
    plus the float32 slot-order sum of the rows' gradients (two terms: addition commutes);
  * replicated (router) gradients are summed over ranks in rank order by an all-gather.
  No float64 anywhere; torch's matmul is never asked to be batch-size independent.

WEFT_TEST_INJECT=1 flips the lowest bit of one element before each comparison, which must then
fail.
"""

import numpy as np
import pytest
import torch

import weft
from weft import _lib
from weft.torch_moe import MoELayer, init_parameters

from _helpers import inject_enabled

pytestmark = pytest.mark.skipif(not _lib.has("weft_moe_dispatch"), reason="the loaded libweft lacks moe.h")

H, F = 8, 12  # hidden, expert FFN width


def assert_bitwise(what, got, ref):
    """got and ref have the same float32 bits (small integers compare exactly as float32)."""
    g = np.array(got.detach().numpy() if hasattr(got, "detach") else got, dtype=np.float32, copy=True)
    r = np.ascontiguousarray(ref.detach().numpy() if hasattr(ref, "detach") else ref, dtype=np.float32)
    assert g.shape == r.shape, (what, g.shape, r.shape)
    if inject_enabled():
        if not g.size:
            return
        g.view(np.uint32).flat[g.size // 2] ^= 1
        assert not np.array_equal(g.view(np.uint32), r.view(np.uint32)), "%s: injected bit flip not caught" % what
        print("INJECT %s: caught" % what)
        return
    same = g.view(np.uint32) == r.view(np.uint32)
    assert same.all(), "%s: %d of %d elements differ (max |diff| %.3g)" % (
        what, int((~same).sum()), same.size, float(np.max(np.abs(g.astype(np.float64) - r))))


def _tokens(rank, n, seed, empty_rank):
    """Every rank's x (every rank can make every rank's): T_r = 5 + 2 r rows (0 on empty_rank)."""
    out = []
    for r in range(n):
        rows = 0 if r == empty_rank else 5 + 2 * r
        g = torch.Generator().manual_seed(1000 * seed + r)
        out.append(torch.randn(rows, H, generator=g))
    return out


def _cotangents(xs, seed):
    return [torch.randn(x.shape, generator=torch.Generator().manual_seed(77 * seed + r)) for r, x in enumerate(xs)]


# ------------------------------------------------------------------ the dense reference

def _torch_router(logits, k, normalize):
    probs = torch.softmax(logits, dim=-1)
    w, idx = torch.topk(probs, k, dim=-1)
    if normalize:
        w = w / w.sum(dim=-1, keepdim=True)
    return w, idx


def _mlp(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


def dense_reference(xs, gs, experts, k, seed, router, normalize, router_options):
    """One process, no weft communication: out per rank, grad x per rank, the router's gradient
    summed in rank order, and every expert's parameter gradients."""
    p = init_parameters(experts, H, F, seed)
    n = len(xs)
    xl = [x.clone().requires_grad_(True) for x in xs]
    wr = [p["router"].clone().requires_grad_(True) for _ in range(n)]
    routed = []  # per rank: (weights tensor in the graph or None, weights np, indices np, weft logits)
    for r in range(n):
        logits = torch.nn.functional.linear(xl[r], wr[r])
        if router == "torch":
            w, idx = _torch_router(logits, k, normalize)
            routed.append((w, w.detach().numpy().copy(), idx.numpy().astype(np.int64), logits))
        else:
            res = weft.route(logits.detach(), experts, k, normalize=normalize, **router_options)
            routed.append((None, res.weights, res.indices.astype(np.int64), logits))
    # Expert e's rows: tokens routed to it, in (rank, token) order.
    members = {e: [(r, t, j) for r in range(n) for t in range(xs[r].shape[0]) for j in range(k)
                   if routed[r][2][t, j] == e] for e in range(experts)}
    params = {e: {name: p[name][e].clone().requires_grad_(True) for name in ("w1", "b1", "w2", "b2")}
              for e in range(experts)}
    xe, ye, where = {}, {}, {}
    for e, m in members.items():
        rows = np.stack([xs[r][t].numpy() for r, t, _ in m]) if m else np.zeros((0, H), np.float32)
        xe[e] = torch.from_numpy(rows).requires_grad_(True)
        ye[e] = _mlp(xe[e], **params[e])
        for pos, (r, t, j) in enumerate(m):
            where[(r, t, j)] = (e, pos)
    outs, gx_dispatch, gws = [], [], []
    gy = {e: np.zeros((len(m), H), np.float32) for e, m in members.items()}
    for r in range(n):
        t_r = xs[r].shape[0]
        w, idx = routed[r][1], routed[r][2]
        y_np = {e: ye[e].detach().numpy() for e in ye}
        out = np.zeros((t_r, H), np.float32)
        gw = np.zeros((t_r, k), np.float32)
        g = gs[r].numpy()
        for j in range(k):  # float32, slot order, from 0
            for t in range(t_r):
                if idx[t, j] < 0:
                    continue
                e, pos = where[(r, t, j)]
                out[t] = out[t] + w[t, j] * y_np[e][pos]
                gy[e][pos] = w[t, j] * g[t]
                acc = np.float32(0)
                for q in range(H):  # the weights' gradient: float32 dot product in element order
                    acc = np.float32(acc + np.float32(g[t, q] * y_np[e][pos, q]))
                gw[t, j] = acc
        outs.append(out)
        gws.append(gw)
    for e in ye:
        if len(members[e]):
            ye[e].backward(torch.from_numpy(gy[e]))
    for r in range(n):
        t_r = xs[r].shape[0]
        idx = routed[r][2]
        gx = np.zeros((t_r, H), np.float32)
        for j in range(k):
            for t in range(t_r):
                if idx[t, j] >= 0:
                    e, pos = where[(r, t, j)]
                    gx[t] = gx[t] + xe[e].grad[pos].numpy()
        gx_dispatch.append(gx)
        w_graph, _, _, logits = routed[r]
        if router == "torch":
            w_graph.backward(torch.from_numpy(gws[r]))
        else:
            g_logits = weft.router_backward(logits.detach(), routed[r][2].astype(np.int32), gws[r], experts, k,
                                            normalize=normalize, **router_options)
            logits.backward(torch.from_numpy(g_logits))
    grad_x = [(xl[r].grad if xl[r].grad is not None else torch.zeros_like(xs[r])) + torch.from_numpy(gx_dispatch[r])
              for r in range(n)]
    grad_router = wr[0].grad.clone()
    for r in range(1, n):
        grad_router = grad_router + wr[r].grad
    grad_experts = {e: {name: (v.grad if v.grad is not None else torch.zeros_like(v)) for name, v in ps.items()}
                    for e, ps in params.items()}
    return outs, grad_x, grad_router, grad_experts


# ------------------------------------------------------------------ the test

CASES = [(k, e, "torch", {}, -1, 0) for e in (8, 6) for k in (1, 2, 4)] + [
    (2, 6, "torch", {}, 1, 0),  # rank 1 has no tokens
    (2, 8, "weft", dict(drop="by_position", capacity_factor=1.0), -1, 0),  # capacity drops slots
    (4, 6, "torch", {}, -1, 4),  # each expert's rows padded to a multiple of 4
]


@pytest.mark.parametrize("k,experts,router,router_options,empty_rank,align", CASES,
                         ids=["k%d-E%d-%s%s%s" % (c[0], c[1], c[2], "-empty%d" % c[4] if c[4] >= 0 else "",
                                                  "-align%d" % c[5] if c[5] else "") for c in CASES])
def test_moe_layer_equals_dense_bitwise(world, k, experts, router, router_options, empty_rank, align):
    if router == "weft" and not _lib.has("weft_router_forward"):
        pytest.skip("the loaded libweft lacks the router")
    seed = 10 * k + experts
    n, rank = world.size, world.rank
    xs = _tokens(rank, n, seed, empty_rank)
    gs = _cotangents(xs, seed)
    normalize = k > 1
    with weft.Moe(world, experts, H, expert_alignment=align) as moe:
        layer = MoELayer(moe, F, k, seed=seed, router=router, normalize=normalize, **router_options)
        x = xs[rank].clone().requires_grad_(True)
        out = layer(x)
        (out * gs[rank]).sum().backward()
        layer.reduce_replicated_grads()
        ref_out, ref_gx, ref_grouter, ref_gexp = dense_reference(xs, gs, experts, k, seed, router, normalize,
                                                                 router_options)
        assert_bitwise("rank %d out" % rank, out, ref_out[rank])
        assert_bitwise("rank %d grad x" % rank, x.grad, ref_gx[rank])
        assert_bitwise("rank %d grad router" % rank, layer.router.grad, ref_grouter)
        assert_bitwise("rank %d local experts" % rank, layer.local,
                       [e for e in range(experts) if e // -(-experts // n) == rank])
        for e in layer.local:
            for name in ("w1", "b1", "w2", "b2"):
                assert_bitwise("rank %d expert %d grad %s" % (rank, e, name), layer.experts["%s_%d" % (name, e)].grad,
                               ref_gexp[e][name])
    world.barrier()


def test_dispatch_bookkeeping_across_ranks(world):
    """Received rows, their sources and the per-expert grouping against brute force over every
    rank's (deterministic) indices."""
    n, rank, e, k = world.size, world.rank, 6, 2

    def inputs(r):
        g = np.random.default_rng(50 + r)
        t = 3 + r
        idx = np.stack([g.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
        if t > 1:
            idx[1, 1] = weft.DROPPED
        x = (np.arange(t * 4, dtype=np.float32).reshape(t, 4) + 100 * r)
        return x, idx, g.uniform(0.5, 1.0, (t, k)).astype(np.float32)

    x, idx, w = inputs(rank)
    expert_rank = np.array([(q * 7 + 1) % n for q in range(e)], np.int32)  # a scattered placement
    with weft.Moe(world, e, 4, expert_rank=expert_rank) as moe, moe.dispatch(x, idx, w) as hd:
        mine = [q for q in range(e) if expert_rank[q] == rank]
        assert_bitwise("rank %d local experts" % rank, hd.experts, mine)
        expected = []  # (expert, source rank, token, weight, row)
        for q in mine:
            for r in range(n):
                xr, ir, wr = inputs(r)
                for t in range(ir.shape[0]):
                    for j in range(k):
                        if ir[t, j] == q:
                            expected.append((q, r, t, wr[t, j], xr[t]))
        got_rows = hd.tokens.copy()
        assert_bitwise("rank %d rows" % rank, [hd.rows], [len(expected)])
        assert_bitwise("rank %d row_expert" % rank, hd.row_expert, [s[0] for s in expected])
        assert_bitwise("rank %d row_source_rank" % rank, hd.row_source_rank, [s[1] for s in expected])
        assert_bitwise("rank %d row_source_token" % rank, hd.row_source_token, [s[2] for s in expected])
        assert_bitwise("rank %d row weights" % rank, hd.row_weight, np.array([s[3] for s in expected], np.float32))
        assert_bitwise("rank %d received tokens" % rank, got_rows,
                       np.array([s[4] for s in expected], np.float32).reshape(-1, 4))
        # Round trip: each expert returns its row times (expert + 1); combine = slot-order weighted sum.
        out = moe.combine(hd, got_rows * (hd.row_expert[:, None] + 1).astype(np.float32))
        ref = np.zeros_like(x)
        for j in range(k):
            for t in range(x.shape[0]):
                if idx[t, j] >= 0:
                    ref[t] = ref[t] + w[t, j] * (x[t] * np.float32(idx[t, j] + 1))
        assert_bitwise("rank %d combine" % rank, out, ref)
    world.barrier()


@pytest.mark.parametrize("bad", ["index", "weights shape", "expert_out shape"])
def test_bad_input_on_one_rank_fails_every_rank(world, bad):
    """One rank's bad input fails the collective on every rank, naming that rank (a problem only
    the binding sees is still refused through weft, so no rank waits); the Moe stays usable."""
    rank, culprit = world.rank, 1 % world.size
    x = np.ones((4, 3), np.float32)
    idx = np.array([[0], [1], [2], [3]], np.int32) % 4
    w = np.ones((4, 1), np.float32)
    with weft.Moe(world, 4, 3) as moe:
        if bad != "expert_out shape":
            if rank == culprit and bad == "index":
                idx = idx.copy()
                idx[2, 0] = 9
            if rank == culprit and bad == "weights shape":
                w = np.ones((4, 2), np.float32)
            with pytest.raises(weft.WeftError) as info:
                moe.dispatch(x, idx, w)
            text = str(info.value) + str(info.value.__cause__ or "")
            assert "rank %d" % culprit in text or (rank == culprit and "weights" in text), text
        else:
            with moe.dispatch(x, idx, w) as hd:
                rows = hd.rows + (1 if rank == culprit else 0)
                with pytest.raises(weft.WeftError) as info:
                    moe.combine(hd, np.zeros((rows, 3), np.float32))
                assert "rank %d" % culprit in str(info.value), str(info.value)
        with moe.dispatch(x, idx % 4, np.ones((4, 1), np.float32)) as hd:  # still usable
            out = moe.combine(hd, hd.tokens.copy())
            assert_bitwise("rank %d combine after a refusal" % rank, out, x)
    world.barrier()
