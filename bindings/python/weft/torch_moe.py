"""A torch MoE layer made expert-parallel over weft (weft/moe.h): autograd Functions for the
router, dispatch and combine, and a small MoELayer built from them.

    moe = weft.Moe(comm, experts=8, hidden=16)
    layer = MoELayer(moe, ffn=32, topk=2, seed=0)    # this rank's experts only
    out = layer(x)                                   # x [T, H] float32, a CPU tensor
    out.backward(g); layer.reduce_replicated_grads() # router grads summed over ranks in rank order

Dispatch.apply(x, indices, weights, moe, state) -> the rows this rank received (backward: an
unweighted combine, so a token's gradient is the float32 sum of its slot rows' gradients in slot
order). Combine.apply(expert_out, weights, moe, handle) -> out [T, H] (backward:
combine_backward, giving the expert outputs' gradient and the float32 gradient of the weights,
which flows on into the router). Route.apply(logits, config) runs weft's router (its backward is
weft_router_backward). Every rank must run the same sequence of layers forward and backward:
dispatch and combine are collectives, and so are their backward passes.
"""

import torch

from ._moe import Moe, MoeHandle, RouterConfig, route, router_backward


class DispatchState:
    """Where Dispatch.apply leaves the MoeHandle of its dispatch (autograd Functions return only
    tensors)."""

    def __init__(self):
        self.handle = None


class Route(torch.autograd.Function):
    """(weights float32 [T, k], indices int64 [T, k], aux_loss, z_loss) = weft's router on logits
    [T, E] (float32 or bfloat16); gradients of weights, aux_loss and z_loss flow to the logits
    through weft_router_backward, the selection held fixed. indices are not differentiable."""

    @staticmethod
    def forward(ctx, logits, config):
        if not isinstance(config, RouterConfig):
            raise TypeError("Route.apply(logits, config): config must be a weft.RouterConfig")
        r = route(logits.detach(), config=config)
        ctx.save_for_backward(logits)
        ctx.config, ctx.indices = config, r.indices
        indices = torch.from_numpy(r.indices.astype("int64"))
        ctx.mark_non_differentiable(indices)
        return (torch.from_numpy(r.weights), indices, torch.tensor(r.aux_loss, dtype=torch.float32),
                torch.tensor(r.z_loss, dtype=torch.float32))

    @staticmethod
    def backward(ctx, grad_weights, _grad_indices, grad_aux, grad_z):
        (logits,) = ctx.saved_tensors
        g = router_backward(logits.detach(), ctx.indices, grad_weights.detach().float().contiguous(),
                            grad_aux=float(grad_aux), grad_z=float(grad_z), config=ctx.config)
        return torch.from_numpy(g).to(logits.dtype), None


class Dispatch(torch.autograd.Function):
    """The rows [rows, H] this rank receives from dispatching x [T, H] by indices / weights
    [T, k] over `moe` (the MoeHandle lands in state.handle). Differentiable in x only."""

    @staticmethod
    def forward(ctx, x, indices, weights, moe, state):
        if not isinstance(moe, Moe):
            raise TypeError("Dispatch.apply(..., moe, state): moe must be a weft.Moe")
        handle = moe.dispatch(x.detach(), indices.detach().to(torch.int32), weights.detach().float())
        state.handle = handle
        ctx.moe, ctx.handle = moe, handle
        # A copy: the handle's view dies with the handle, the autograd output must not.
        return handle.tokens.clone()

    @staticmethod
    def backward(ctx, grad_rows):
        gx = ctx.moe.combine(ctx.handle, grad_rows.detach().contiguous(), weighted=False)
        return gx, None, None, None, None


class Combine(torch.autograd.Function):
    """out [T, H] = per token the float32 sum in slot order of weight * expert_out row, from
    expert_out [rows, H] in the received layout of `handle`. `weights` must hold the values
    that were dispatched (they are the handle's); it is an input so that its gradient flows."""

    @staticmethod
    def forward(ctx, expert_out, weights, moe, handle):
        if not isinstance(handle, MoeHandle):
            raise TypeError("Combine.apply(..., moe, handle): handle must be a weft.MoeHandle")
        ctx.moe, ctx.handle = moe, handle
        ctx.weights_dtype = weights.dtype
        return moe.combine(handle, expert_out.detach().contiguous())

    @staticmethod
    def backward(ctx, grad_out):
        g_rows, g_weights = ctx.moe.combine_backward(ctx.handle, grad_out.detach().contiguous())
        return g_rows, g_weights.to(ctx.weights_dtype), None, None


def dispatch(moe, x, indices, weights):
    """(received rows, MoeHandle): Dispatch.apply with its handle."""
    state = DispatchState()
    rows = Dispatch.apply(x, indices, weights, moe, state)
    return rows, state.handle


def init_parameters(experts, hidden, ffn, seed):
    """The layer's full parameter set, the same on every rank for one seed: router [E, H] and,
    per expert, w1 [H, F], b1 [F], w2 [F, H], b2 [H] (stacked over E), float32."""
    g = torch.Generator().manual_seed(int(seed))

    def u(*shape, fan_in):
        return (torch.rand(*shape, generator=g, dtype=torch.float32) * 2 - 1) / fan_in ** 0.5

    return {"router": u(experts, hidden, fan_in=hidden), "w1": u(experts, hidden, ffn, fan_in=hidden),
            "b1": u(experts, ffn, fan_in=hidden), "w2": u(experts, ffn, hidden, fan_in=ffn),
            "b2": u(experts, hidden, fan_in=ffn)}


def expert_mlp(x, w1, b1, w2, b2):
    """One expert: relu(x w1 + b1) w2 + b2. Each output row depends on its input row alone (for
    a given number of rows: the matmuls' summation order is fixed by the shapes)."""
    return torch.relu(x @ w1 + b1) @ w2 + b2


class MoELayer(torch.nn.Module):
    """router (Linear H -> E, no bias, replicated) -> top-k (router="torch": softmax, top-k,
    optionally renormalised; router="weft": weft's router with `router_options`) -> dispatch ->
    this rank's experts (2-layer MLPs, expert_mlp) -> combine. Parameters from init_parameters
    (seed): every rank holds the router and its own experts (moe.expert_rank(e) == rank).
    forward(x [T, H]) returns out [T, H]; aux_loss and z_loss of the last forward (weft router)
    are in self.aux_loss / self.z_loss (tensors in the graph)."""

    def __init__(self, moe, ffn, topk, seed=0, router="torch", normalize=False, **router_options):
        super().__init__()
        if router not in ("torch", "weft"):
            raise ValueError("router=%r: expected \"torch\" or \"weft\"" % (router,))
        self.moe, self.topk, self.router_kind, self.normalize = moe, int(topk), router, bool(normalize)
        self.router_config = (RouterConfig(moe.experts, topk, normalize=normalize, **router_options)
                              if router == "weft" else None)
        p = init_parameters(moe.experts, moe.hidden, ffn, seed)
        rank = moe.comm.rank
        self.local = [e for e in range(moe.experts) if moe.expert_rank(e) == rank]
        self.router = torch.nn.Parameter(p["router"])
        self.experts = torch.nn.ParameterDict()
        for e in self.local:
            for name in ("w1", "b1", "w2", "b2"):
                self.experts["%s_%d" % (name, e)] = torch.nn.Parameter(p[name][e].clone())
        self.aux_loss = self.z_loss = None

    def expert(self, e, rows):
        p = self.experts
        return expert_mlp(rows, p["w1_%d" % e], p["b1_%d" % e], p["w2_%d" % e], p["b2_%d" % e])

    def route(self, x):
        logits = torch.nn.functional.linear(x, self.router)
        if self.router_kind == "weft":
            weights, indices, self.aux_loss, self.z_loss = Route.apply(logits, self.router_config)
            return weights, indices
        probs = torch.softmax(logits, dim=-1)
        weights, indices = torch.topk(probs, self.topk, dim=-1)
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights, indices

    def forward(self, x):
        weights, indices = self.route(x)
        rows, handle = dispatch(self.moe, x, indices, weights)
        pieces = []
        for j, e in enumerate(handle.experts.tolist()):
            start, stop = handle.expert_rows(j)
            pieces.append(self.expert(e, rows[start:stop]))
            pad = int(handle.offsets[j + 1]) - stop
            if pad:
                pieces.append(rows.new_zeros(pad, rows.shape[1]))
        # rows[:0] keeps the received rows in the graph on a rank that holds no expert, so that
        # every rank runs Dispatch's backward (a collective).
        expert_out = torch.cat(pieces + [rows[:0]]) if pieces else rows[:0] * 1
        out = Combine.apply(expert_out, weights, self.moe, handle)
        if not torch.is_grad_enabled():
            handle.close()
        return out

    def replicated_parameters(self):
        """The parameters every rank holds (the router), whose gradients sum over ranks."""
        return [self.router]

    def reduce_replicated_grads(self):
        """Sums the replicated parameters' gradients over the ranks, in rank order in float32
        (an all-gather, then ((g0 + g1) + g2) + ...), so every rank gets the same bits, equal to
        one process adding the ranks' gradients in that order."""
        comm = self.moe.comm
        for p in self.replicated_parameters():
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            parts = torch.empty((comm.size,) + tuple(g.shape), dtype=g.dtype)
            comm.allgather(g.contiguous(), parts)
            total = parts[0].clone()
            for r in range(1, comm.size):
                total = total + parts[r]
            p.grad = total


__all__ = ["Combine", "Dispatch", "DispatchState", "MoELayer", "Route", "dispatch", "expert_mlp", "init_parameters"]
