"""Megatron-style tensor, sequence and context parallelism for torch, over weft's mesh dims.

Regions (torch.autograd.Functions over weft_region_apply; each is called as
``F.apply(tensor, mesh, dim_name, split_dim)`` and has a lower-case helper with defaults):

=================================  ===========================  ===========================
Function / helper                  forward                      backward
=================================  ===========================  ===========================
CopyToRegion / copy_to_region      identity                     all-reduce (sum)
ReduceFromRegion / reduce_from_..  all-reduce (sum)             identity
ScatterToRegion / scatter_to_..    keep this rank's chunk       all-gather
GatherFromRegion / gather_from_..  all-gather                   keep this rank's chunk
GatherFromSequenceRegion / ..      all-gather (split_dim 0)     reduce-scatter (sum)
ReduceScatterToSequenceRegion / .. reduce-scatter (split_dim 0) all-gather
=================================  ===========================  ===========================

Chunks follow torch.chunk's rule over the dim's group; an all-gather of uneven chunks needs
``extent=`` (the whole extent along split_dim) in forward. A column-parallel linear is
``y = F.linear(copy_to_region(x, mesh, "tp"), w_shard, b_shard)``, the row-parallel one after it
``reduce_from_region(F.linear(y, w_shard), mesh, "tp") + b``; with sequence parallelism
gather_from_sequence_region / reduce_scatter_to_sequence_region replace copy / reduce.

Context parallelism: ring_exchange() rotates tensors one step around a mesh dim (weft_ring_shift,
optionally async), and ring_attention() is attention with the sequence split over that dim:
mode="ring" rotates key/value blocks (online softmax forward, a backward that also rotates
dK/dV) and mode="allgather" all-gathers K and V (GatherFromSequenceRegion).

CPU tensors (weft's host path); the tensors handed to weft are contiguous or strided views with
non-negative strides.
"""

import math

import torch

from ._regions import Region, dim_group, out_shape, region_apply, region_op, ring_shift

__all__ = [
    "CopyToRegion", "ReduceFromRegion", "ScatterToRegion", "GatherFromRegion", "GatherFromSequenceRegion",
    "ReduceScatterToSequenceRegion", "copy_to_region", "reduce_from_region", "scatter_to_region",
    "gather_from_region", "gather_from_sequence_region", "reduce_scatter_to_sequence_region", "RingRequest",
    "ring_exchange", "RingAttention", "ring_attention", "attention_reference",
]


# ------------------------------------------------------------------ regions

def _run(x, mesh, dim, region, backward, split_dim, extent=None):
    """One direction of `region` on tensor x; identity returns x itself."""
    if region_op(region, backward) == "identity":
        return x
    shape = out_shape(mesh, dim, region, backward, split_dim, tuple(x.shape), extent)
    out = torch.empty(shape, dtype=x.dtype, device=x.device)
    return region_apply(mesh, dim, region, backward, split_dim, x.detach(), out)


def _split_dim(x, split_dim):
    nd = x.dim()
    if not -nd <= split_dim < max(nd, 1):
        raise IndexError("split_dim %d is out of range for a %d-d tensor" % (split_dim, nd))
    return split_dim % nd if nd else 0


def _region_function(name, region, default_split, doc):
    def forward(ctx, x, mesh, dim="tp", split_dim=default_split, extent=None):
        sd = _split_dim(x, split_dim)
        ctx.saved_args = (mesh, dim, sd, int(x.shape[sd]) if x.dim() else None)
        return _run(x, mesh, dim, region, False, sd, extent)

    def backward(ctx, grad):
        mesh, dim, sd, extent = ctx.saved_args
        return _run(grad, mesh, dim, region, True, sd, extent), None, None, None, None

    doc += ("\n\n    apply(x, mesh, dim=\"tp\", split_dim=%d, extent=None): over this rank's group along mesh dim "
            "`dim`;\n    extent is the whole extent along split_dim for a forward all-gather of uneven chunks."
            % default_split)
    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward),
                                                   "__doc__": doc, "__module__": __name__, "region": region})


CopyToRegion = _region_function("CopyToRegion", Region.COPY, -1, "Forward identity, backward all-reduce (sum): the "
                                "input of a column-parallel linear (Megatron's f).")
ReduceFromRegion = _region_function("ReduceFromRegion", Region.REDUCE, -1, "Forward all-reduce (sum), backward "
                                    "identity: the output of a row-parallel linear (Megatron's g).")
ScatterToRegion = _region_function("ScatterToRegion", Region.SCATTER, -1, "Forward keep this rank's chunk along "
                                   "split_dim, backward all-gather.")
GatherFromRegion = _region_function("GatherFromRegion", Region.GATHER, -1, "Forward all-gather along split_dim, "
                                    "backward keep this rank's chunk.")
GatherFromSequenceRegion = _region_function("GatherFromSequenceRegion", Region.SEQ_GATHER, 0, "Forward all-gather "
                                            "along split_dim (the sequence), backward reduce-scatter (sum).")
ReduceScatterToSequenceRegion = _region_function("ReduceScatterToSequenceRegion", Region.SEQ_REDUCE_SCATTER, 0,
                                                 "Forward reduce-scatter (sum) along split_dim (the sequence), "
                                                 "backward all-gather.")


def copy_to_region(x, mesh, dim="tp"):
    """CopyToRegion: identity forward, all-reduce of the gradient over `dim`."""
    return CopyToRegion.apply(x, mesh, dim, -1, None)


def reduce_from_region(x, mesh, dim="tp"):
    """ReduceFromRegion: all-reduce (sum) over `dim` forward, identity backward."""
    return ReduceFromRegion.apply(x, mesh, dim, -1, None)


def scatter_to_region(x, mesh, dim="tp", split_dim=-1):
    """ScatterToRegion: this rank's chunk along split_dim forward, all-gather backward."""
    return ScatterToRegion.apply(x, mesh, dim, split_dim, None)


def gather_from_region(x, mesh, dim="tp", split_dim=-1, extent=None):
    """GatherFromRegion: all-gather along split_dim forward (extent: the whole extent, for
    uneven chunks), this rank's chunk backward."""
    return GatherFromRegion.apply(x, mesh, dim, split_dim, extent)


def gather_from_sequence_region(x, mesh, dim="tp", split_dim=0, extent=None):
    """GatherFromSequenceRegion: all-gather along the sequence dim forward, reduce-scatter
    (sum) backward."""
    return GatherFromSequenceRegion.apply(x, mesh, dim, split_dim, extent)


def reduce_scatter_to_sequence_region(x, mesh, dim="tp", split_dim=0):
    """ReduceScatterToSequenceRegion: reduce-scatter (sum) along the sequence dim forward,
    all-gather backward."""
    return ReduceScatterToSequenceRegion.apply(x, mesh, dim, split_dim, None)


# ------------------------------------------------------------------ ring exchange

class RingRequest:
    """A ring_exchange in flight: wait() returns the received tensors (views of one buffer)."""

    def __init__(self, request, recv, shapes):
        self._request = request
        self._recv = recv
        self._shapes = shapes

    def wait(self):
        if self._request is not None:
            self._request.wait()
            self._request = None
        return _unpack(self._recv, self._shapes)

    def test(self):
        return self._request is None or self._request.test()


def _pack(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def _unpack(flat, shapes):
    out, at = [], 0
    for s in shapes:
        n = math.prod(s)
        out.append(flat[at:at + n].view(s))
        at += n
    return out


def ring_exchange(tensors, mesh, dim="cp", shift=1, async_op=False):
    """Sends `tensors` (one dtype; packed into one buffer, one weft_ring_shift) to the rank
    `shift` places further along mesh dim `dim` and receives the same shapes from the rank
    `shift` places before. Returns the received tensors, or with async_op=True a RingRequest
    whose wait() returns them (compute on the current block meanwhile). Every rank of the ring
    must send the same shapes."""
    shapes = [tuple(t.shape) for t in tensors]
    send = _pack(tensors)
    recv = torch.empty_like(send)
    if async_op:
        return RingRequest(ring_shift(mesh, dim, shift, send, recv, async_op=True), recv, shapes)
    ring_shift(mesh, dim, shift, send, recv)
    return _unpack(recv, shapes)


# ------------------------------------------------------------------ ring attention

def _scores(q, k, scale, causal, q_block, k_block):
    """Scaled scores of q against one key block; None when causality masks the whole block.
    Blocks are whole ranks' chunks: block i holds positions [i*S, (i+1)*S)."""
    if causal and k_block > q_block:
        return None
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal and k_block == q_block:
        n, m = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s


class RingAttention(torch.autograd.Function):
    """Attention over a sequence split in equal contiguous chunks along mesh dim `dim` (rank i
    of the dim holds positions [i*S, (i+1)*S)): softmax(q k^T * scale) v for this rank's
    queries against every rank's keys, with key/value blocks rotated around the ring
    (weft_ring_shift, the next block's transfer overlapping this block's compute). Forward keeps
    a running max and sum (online softmax) and saves the log-sum-exp; backward recomputes each
    block's probabilities from it and rotates the dK/dV accumulators around the ring with the
    blocks, so every rank ends with the gradients of its own keys and values.

    apply(q, k, v, mesh, dim, causal, scale); q, k, v: (..., S, D) CPU tensors."""

    @staticmethod
    def forward(ctx, q, k, v, mesh, dim="cp", causal=False, scale=None):
        n, me = dim_group(mesh, dim)
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        q, k, v = q.detach(), k.detach(), v.detach()
        shapes = [tuple(k.shape), tuple(v.shape)]
        kv = _pack([k, v])
        m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros(q.shape[:-1], dtype=q.dtype, device=q.device)
        o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=q.device)
        for step in range(n):
            src = (me - step) % n  # the rank whose keys we hold (blocks move to the next rank)
            req = None
            if step < n - 1:
                req = ring_shift(mesh, dim, 1, kv, torch.empty_like(kv), async_op=True)
            kb, vb = _unpack(kv, shapes)
            s = _scores(q, kb, scale, causal, me, src)
            if s is not None:
                m_new = torch.maximum(m, s.amax(-1))  # finite: step 0 is our own block
                p = torch.exp(s - m_new.unsqueeze(-1))
                alpha = torch.exp(m - m_new)
                l = l * alpha + p.sum(-1)
                o = o * alpha.unsqueeze(-1) + torch.matmul(p, vb)
                m = m_new
            if req is not None:
                kv = req.wait()
        out = o / l.unsqueeze(-1)
        lse = m + torch.log(l)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.saved_args = (mesh, dim, causal, scale)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        mesh, dim, causal, scale = ctx.saved_args
        n, me = dim_group(mesh, dim)
        dout = dout.contiguous()
        delta = (dout * out).sum(-1, keepdim=True)  # rowsum(dO * O)
        shapes = [tuple(k.shape), tuple(v.shape)]
        kv = _pack([k, v])
        dq = torch.zeros_like(q)
        dreq = None  # the dK/dV accumulator of the block we hold next, coming from the previous rank
        for step in range(n):
            src = (me - step) % n
            req = None
            if step < n - 1:
                req = ring_shift(mesh, dim, 1, kv, torch.empty_like(kv), async_op=True)
            kb, vb = _unpack(kv, shapes)
            dk = torch.zeros_like(k)
            dv = torch.zeros_like(v)
            s = _scores(q, kb, scale, causal, me, src)
            if s is not None:
                p = torch.exp(s - lse.unsqueeze(-1))
                dv = torch.matmul(p.transpose(-1, -2), dout)
                ds = p * (torch.matmul(dout, vb.transpose(-1, -2)) - delta)
                dq += torch.matmul(ds, kb) * scale
                dk = torch.matmul(ds.transpose(-1, -2), q) * scale
            dkv = _pack([dk, dv])
            if dreq is not None:
                dkv += dreq.wait()  # what the ranks before us added to this block's gradients
            dreq = ring_shift(mesh, dim, 1, dkv, torch.empty_like(dkv), async_op=True)
            if req is not None:
                kv = req.wait()
        dk, dv = _unpack(dreq.wait(), shapes)  # our own block, after a full turn
        return dq, dk, dv, None, None, None, None


def attention_reference(q, k, v, causal=False, scale=None, q_offset=0):
    """Plain attention, softmax(q k^T * scale) v (causal: query i + q_offset sees keys <= it)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        qi = torch.arange(q.shape[-2], device=q.device).unsqueeze(-1) + q_offset
        kj = torch.arange(k.shape[-2], device=q.device).unsqueeze(0)
        s = s.masked_fill(kj > qi, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def ring_attention(q, k, v, mesh, dim="cp", causal=False, scale=None, mode="ring"):
    """Context-parallel attention: q, k, v are this rank's chunk (..., S, D) of a sequence split
    in equal contiguous chunks over mesh dim `dim` (rank i holds positions [i*S, (i+1)*S));
    returns this rank's chunk of softmax(Q K^T * scale) V (scale None = 1/sqrt(D); causal masks
    later positions). Differentiable in q, k and v.

    mode="ring": RingAttention (blocks rotated with weft.ring_shift, online softmax, O(S) memory
    per rank for keys/values). mode="allgather": K and V all-gathered along the sequence
    (gather_from_sequence_region, whose backward reduce-scatters dK/dV), then plain attention."""
    if mode == "ring":
        return RingAttention.apply(q, k, v, mesh, dim, causal, scale)
    if mode != "allgather":
        raise ValueError("mode=%r: expected \"ring\" or \"allgather\"" % (mode,))
    n, me = dim_group(mesh, dim)
    kf = gather_from_sequence_region(k, mesh, dim, split_dim=-2)
    vf = gather_from_sequence_region(v, mesh, dim, split_dim=-2)
    return attention_reference(q, kf, vf, causal, scale, q_offset=me * q.shape[-2])
