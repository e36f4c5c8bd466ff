"""Tensor and sequence parallelism in torch over weft (weft.torch_parallel's region autograd
Functions) across the ranks of a weftrun job.

First the six regions' forward and backward against torch computations of every rank's input;
then PARITY: a 3-layer float32 MLP (fixed seed) trained 20 steps with SGD

  (a) TP: the first linear column-parallel (CopyToRegion before it), the second row-parallel
      (ReduceFromRegion after it), the third replicated;
  (b) TP + sequence parallelism: the input split along the sequence dim,
      GatherFromSequenceRegion before the TP block and ReduceScatterToSequenceRegion after it;
      the replicated parameters' gradients (partial per sequence chunk) summed over tp with a
      weft.Bucketer;
  (c) DP=2 x TP=2 on a 2-d mesh (4 ranks): TP as in (a) on each half of the batch, every
      gradient averaged over dp with a weft.Bucketer on the mesh's dp communicator;

must equal single-process training of the same model on the whole batch to 1e-5 relative
(max |diff| / max |ref|) on every parameter, the sharded weights all-gathered with
comm.allgather before the comparison. WEFT_TEST_INJECT=1 corrupts one gathered element before
each comparison, which must then fail.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import weft
import weft.torch_parallel as tp
from weft import _lib
from _helpers import assert_parity, relative_error

TOL = 1e-5
STEPS, LR = 20, 0.1
D_IN, HID, D_MID, D_OUT = 8, 16, 8, 4
NAMES = ["w1", "b1", "w2", "b2", "w3", "b3"]


@pytest.fixture(autouse=True)
def _needs_regions():
    if not _lib.has("weft_region_apply"):
        pytest.skip("the loaded libweft lacks weft_region_apply")


def make_mesh(world, tp_size):
    return weft.Mesh(world, (world.size // tp_size, tp_size), ("dp", "tp"))


def tp_sizes(world):
    return sorted({2, world.size} & {k for k in range(2, world.size + 1) if world.size % k == 0 and HID % k == 0})


def chunk(n, k, i):
    c = -(-n // k)
    return min(i * c, n), min((i + 1) * c, n)


# ------------------------------------------------------------------ the regions, one by one

def rank_tensor(r, shape):
    g = torch.Generator().manual_seed(1000 + r)
    return torch.randint(-5, 6, shape, generator=g).to(torch.float32)


@pytest.mark.parametrize("name", ["copy", "reduce", "scatter", "gather", "seq_gather", "seq_reduce_scatter"])
def test_region_functions(world, name):
    with make_mesh(world, 2 if world.size % 2 == 0 else world.size) as mesh:
        k, me = mesh.shape[1], mesh.coords[1]
        # Forward input: the whole tensor for ops that keep or split it, a chunk for all-gathers.
        whole = (6, 3)
        gathers = name in ("gather", "seq_gather")
        split = 0 if name.startswith("seq") else 1
        whole = (6, 4) if split == 1 else whole

        def fwd_in(r):
            if gathers:
                lo, hi = chunk(whole[split], k, r)
                return rank_tensor(r, whole[:split] + (hi - lo,) + whole[split + 1:])
            return rank_tensor(r, whole)

        ins = [fwd_in(r) for r in range(k)]
        x = ins[me].clone().requires_grad_(True)
        fn = {"copy": lambda t: tp.copy_to_region(t, mesh, "tp"),
              "reduce": lambda t: tp.reduce_from_region(t, mesh, "tp"),
              "scatter": lambda t: tp.scatter_to_region(t, mesh, "tp", split),
              "gather": lambda t: tp.gather_from_region(t, mesh, "tp", split, extent=whole[split]),
              "seq_gather": lambda t: tp.gather_from_sequence_region(t, mesh, "tp", extent=whole[split]),
              "seq_reduce_scatter": lambda t: tp.reduce_scatter_to_sequence_region(t, mesh, "tp")}[name]
        y = fn(x)
        # Each rank's output gradient, then the expected values from torch on every rank's data.
        def out_shape(r):  # a chunk (uneven over 3 ranks) for scatters, the whole tensor otherwise
            if name in ("scatter", "seq_reduce_scatter"):
                lo, hi = chunk(whole[split], k, r)
                return whole[:split] + (hi - lo,) + whole[split + 1:]
            return whole

        gys = [rank_tensor(50 + r, out_shape(r)) for r in range(k)]
        assert tuple(y.shape) == out_shape(me)
        (y * gys[me]).sum().backward()
        lo, hi = chunk(whole[split], k, me)
        cut = (lambda t: t[lo:hi]) if split == 0 else (lambda t: t[:, lo:hi])
        want_y = {"copy": lambda: ins[me], "reduce": lambda: sum(ins), "scatter": lambda: cut(ins[me]),
                  "gather": lambda: torch.cat(ins, split), "seq_gather": lambda: torch.cat(ins, split),
                  "seq_reduce_scatter": lambda: cut(sum(ins))}[name]()
        want_g = {"copy": lambda: sum(gys), "reduce": lambda: gys[me], "scatter": lambda: torch.cat(gys, split),
                  "gather": lambda: cut(gys[me]), "seq_gather": lambda: cut(sum(gys)),
                  "seq_reduce_scatter": lambda: torch.cat(gys, split)}[name]()
        assert torch.equal(y.detach(), want_y)
        assert torch.equal(x.grad, want_g)


# ------------------------------------------------------------------ the model

def init_params():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(HID, D_IN, generator=g) * 0.4, torch.randn(HID, generator=g) * 0.1,
            torch.randn(D_MID, HID, generator=g) * 0.3, torch.randn(D_MID, generator=g) * 0.1,
            torch.randn(D_OUT, D_MID, generator=g) * 0.4, torch.randn(D_OUT, generator=g) * 0.1]


def data(step, shape_x, shape_y):
    g = torch.Generator().manual_seed(500 + step)
    return torch.randn(*shape_x, generator=g), torch.randn(*shape_y, generator=g)


def mlp(p, x):
    h = torch.tanh(F.linear(x, p[0], p[1]))
    h = torch.tanh(F.linear(h, p[2], p[3]))
    return F.linear(h, p[4], p[5])


def reference(shape_x, shape_y):
    """Single-process SGD training on the whole batch."""
    p = [torch.nn.Parameter(t.clone()) for t in init_params()]
    opt = torch.optim.SGD(p, lr=LR)
    for step in range(STEPS):
        x, y = data(step, shape_x, shape_y)
        opt.zero_grad(set_to_none=False)
        F.mse_loss(mlp(p, x), y).backward()
        opt.step()
    return [t.detach() for t in p]


def shard_params(me, k):
    """This tp rank's parameters: w1/b1 by rows (column-parallel), w2 by columns (row-parallel)."""
    w1, b1, w2, b2, w3, b3 = init_params()
    lo, hi = chunk(HID, k, me)
    mine = [w1[lo:hi], b1[lo:hi], w2[:, lo:hi], b2, w3, b3]
    p = [torch.nn.Parameter(t.clone().contiguous()) for t in mine]
    for t in p:
        t.grad = torch.zeros_like(t)  # kept in place by backward (the bucketers hold their addresses)
    return p


def tp_block(p, x, mesh):
    """Column-parallel then row-parallel linear (Megatron's f and g around them)."""
    h = torch.tanh(F.linear(tp.copy_to_region(x, mesh, "tp"), p[0], p[1]))
    return tp.reduce_from_region(F.linear(h, p[2]), mesh, "tp") + p[3]


def sp_block(p, x_chunk, mesh):
    """The same block with sequence parallelism: x_chunk is this rank's part of the sequence
    (dim 0); returns this rank's part of the block's output."""
    x = tp.gather_from_sequence_region(x_chunk, mesh, "tp", 0)
    h = torch.tanh(F.linear(x, p[0], p[1]))
    return tp.reduce_scatter_to_sequence_region(F.linear(h, p[2]), mesh, "tp", 0) + p[3]


def gathered(p, mesh):
    """The full parameters from every tp rank's shards (comm.allgather, then numpy reassembly)."""
    comm = mesh.comm("tp")
    k = comm.size
    full = []
    for i, t in enumerate(p):
        a = t.detach().numpy()
        if i in (0, 1, 2):
            src = np.ascontiguousarray(a.T if i == 2 else a)  # gather along the first axis
            out = np.empty((k,) + src.shape, src.dtype)  # equal shards: HID % k == 0
            comm.allgather(src, out)
            whole = np.concatenate(list(out), axis=0)
            full.append(torch.from_numpy(whole.T.copy() if i == 2 else whole))
        else:
            full.append(t.detach())
    return full


def compare(label, p, mesh, ref):
    moved = max(relative_error(a, b) for a, b in zip(init_params(), ref))
    assert moved > 100 * TOL  # training moved the weights far beyond the tolerance
    for name, got, want in zip(NAMES, gathered(p, mesh), ref):
        assert_parity("%s %s" % (label, name), got, want, TOL)


# ------------------------------------------------------------------ parity

@pytest.mark.parametrize("case", ["a", "b"])
def test_tp_parity(world, case):
    if not tp_sizes(world):
        pytest.skip("no tensor-parallel size of 2 or %d divides both %d ranks and %d hidden features"
                    % (world.size, world.size, HID))
    for k in tp_sizes(world):
        with make_mesh(world, k) as mesh:
            me = mesh.coords[1]
            p = shard_params(me, k)
            opt = torch.optim.SGD(p, lr=LR)
            if case == "a":  # batch-first, every tp rank sees the whole batch
                shape_x, shape_y = (6, D_IN), (6, D_OUT)
                for step in range(STEPS):
                    x, y = data(step, shape_x, shape_y)
                    opt.zero_grad(set_to_none=False)
                    out = F.linear(torch.tanh(tp_block(p, x, mesh)), p[4], p[5])
                    F.mse_loss(out, y).backward()
                    opt.step()
            else:  # sequence-first (S, B, D), the sequence split over tp
                shape_x, shape_y = (8, 2, D_IN), (8, 2, D_OUT)
                lo, hi = chunk(shape_x[0], k, me)
                replicated = {"b3": p[5].grad, "w3": p[4].grad, "b2": p[3].grad}  # backward's order
                with weft.Bucketer(mesh.comm("tp"), replicated, op="sum") as sync:
                    for step in range(STEPS):
                        x, y = data(step, shape_x, shape_y)
                        opt.zero_grad(set_to_none=False)
                        out = F.linear(torch.tanh(sp_block(p, x[lo:hi], mesh)), p[4], p[5])
                        # This chunk's share of the whole batch's mean: the shares sum to the loss.
                        loss = ((out - y[lo:hi]) ** 2).sum() / y.numel()
                        loss.backward()
                        for i, param in enumerate((p[5], p[4], p[3])):
                            sync.mark_ready(i, param.grad)
                        sync.finish()  # partial sums over the sequence chunks -> the whole gradient
                        opt.step()
            compare("TP=%d %s" % (k, "tensor parallel" if case == "a" else "sequence parallel"), p, mesh,
                    reference(shape_x, shape_y))


def test_dp_tp_parity(world):
    if world.size != 4:
        pytest.skip("DP=2 x TP=2 needs 4 ranks")
    with make_mesh(world, 2) as mesh:
        dp_rank, me = mesh.coords
        p = shard_params(me, 2)
        opt = torch.optim.SGD(p, lr=LR)
        shape_x, shape_y = (8, D_IN), (8, D_OUT)
        rows = slice(dp_rank * 4, dp_rank * 4 + 4)
        grads = {n: t.grad for n, t in reversed(list(zip(NAMES, p)))}  # backward's order
        with weft.Bucketer(mesh.comm("dp"), grads, op="avg", bucket_bytes=256) as dp_sync:
            assert dp_sync.num_buckets > 1
            for step in range(STEPS):
                x, y = data(step, shape_x, shape_y)
                opt.zero_grad(set_to_none=False)
                out = F.linear(torch.tanh(tp_block(p, x[rows], mesh)), p[4], p[5])
                F.mse_loss(out, y[rows]).backward()
                for i, name in enumerate(grads):
                    dp_sync.mark_ready(i, p[NAMES.index(name)].grad)
                dp_sync.finish()  # the mean of the two halves' mean gradients: the whole batch's
                opt.step()
        compare("DP=2 x TP=2", p, mesh, reference(shape_x, shape_y))
