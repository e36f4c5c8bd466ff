"""Megatron-style tensor parallelism (with data parallelism and sequence parallelism) in torch
over weft.

A 3-layer MLP: the first linear is column-parallel (its output features split over the mesh dim
"tp"), the second row-parallel (its input features split), the third replicated.
weft.torch_parallel's region Functions do the communication: copy_to_region before the
column-parallel layer (backward: all-reduce of dX), reduce_from_region after the row-parallel
one (forward: all-reduce of the partial outputs). With --sequence-parallel the activations
outside the block are split along the sequence instead: gather_from_sequence_region before
(backward reduce-scatter) and reduce_scatter_to_sequence_region after (backward all-gather),
and the replicated parameters' gradients, partial per sequence chunk, are summed over "tp" with
a weft.Bucketer. The mesh is (dp, tp) = (ranks / 2, 2); each dp replica trains on its part of
every batch and a weft.Bucketer on the dp communicator averages the gradients.

After training, the sharded weights are gathered and compared with the same model trained in
this process on whole batches (float32, max |diff| / max |ref| <= 1e-5).

    build/bin/weftrun -n 4 /usr/bin/python3 examples/tensor_parallel_torch.py [--sequence-parallel]
"""

import os
import sys

try:
    import weft
except ImportError:  # running from a checkout: use bindings/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
    import weft

import torch
import torch.nn.functional as F

import weft.torch_parallel as tp

D_IN, HIDDEN, D_MID, D_OUT = 8, 32, 8, 4
SEQ, BATCH = 8, 4  # inputs are (sequence, batch, features)
STEPS, LR = 20, 0.1


def init_params():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(HIDDEN, D_IN, generator=g) * 0.3, torch.randn(HIDDEN, generator=g) * 0.1,
            torch.randn(D_MID, HIDDEN, generator=g) * 0.2, torch.randn(D_MID, generator=g) * 0.1,
            torch.randn(D_OUT, D_MID, generator=g) * 0.3, torch.randn(D_OUT, generator=g) * 0.1]


def batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(SEQ, BATCH, D_IN, generator=g), torch.randn(SEQ, BATCH, D_OUT, generator=g)


def chunk(n, k, i):
    c = -(-n // k)
    return min(i * c, n), min((i + 1) * c, n)


def single_process():
    p = [torch.nn.Parameter(t.clone()) for t in init_params()]
    opt = torch.optim.SGD(p, lr=LR)
    for step in range(STEPS):
        x, y = batch(step)
        h = torch.tanh(F.linear(x, p[0], p[1]))
        h = torch.tanh(F.linear(h, p[2], p[3]))
        opt.zero_grad(set_to_none=False)
        F.mse_loss(F.linear(h, p[4], p[5]), y).backward()
        opt.step()
    return [t.detach() for t in p]


def main():
    sequence_parallel = "--sequence-parallel" in sys.argv[1:]
    comm = weft.Comm.from_env()
    tp_size = 2 if comm.size % 2 == 0 else 1
    mesh = weft.Mesh(comm, (comm.size // tp_size, tp_size), ("dp", "tp"))
    dp_rank, tp_rank = mesh.coords
    dp_size = mesh.shape[0]

    # This rank's shards: w1, b1 by output rows (column-parallel), w2 by input columns (row-parallel).
    w1, b1, w2, b2, w3, b3 = init_params()
    lo, hi = chunk(HIDDEN, tp_size, tp_rank)
    p = [torch.nn.Parameter(t.clone().contiguous()) for t in (w1[lo:hi], b1[lo:hi], w2[:, lo:hi], b2, w3, b3)]
    for t in p:
        t.grad = torch.zeros_like(t)  # backward accumulates in place: the bucketers keep the addresses
    opt = torch.optim.SGD(p, lr=LR)
    order = [5, 4, 3, 2, 1, 0]  # backward produces the last layer's gradients first
    dp_sync = weft.Bucketer(mesh.comm("dp"), [p[i].grad for i in order], op="avg")
    tp_sync = weft.Bucketer(mesh.comm("tp"), [p[i].grad for i in (5, 4, 3)], op="sum") if sequence_parallel else None

    rows = slice(*chunk(BATCH, dp_size, dp_rank))  # this replica's part of every batch
    seq = slice(*chunk(SEQ, tp_size, tp_rank))     # this rank's part of the sequence (sequence parallel)
    for step in range(STEPS):
        x, y = batch(step)
        x, y = x[:, rows], y[:, rows]
        opt.zero_grad(set_to_none=False)
        if sequence_parallel:
            xs = tp.gather_from_sequence_region(x[seq].contiguous(), mesh, "tp", 0)
            h = torch.tanh(F.linear(xs, p[0], p[1]))
            h = tp.reduce_scatter_to_sequence_region(F.linear(h, p[2]), mesh, "tp", 0) + p[3]
            out = F.linear(torch.tanh(h), p[4], p[5])
            ((out - y[seq]) ** 2).sum().div(y.numel()).backward()  # this chunk's share of the mean
            for i, k in enumerate((5, 4, 3)):
                tp_sync.mark_ready(i, p[k].grad)
            tp_sync.finish()  # partial gradients of the replicated parameters, summed over tp
        else:
            h = torch.tanh(F.linear(tp.copy_to_region(x, mesh, "tp"), p[0], p[1]))
            h = tp.reduce_from_region(F.linear(h, p[2]), mesh, "tp") + p[3]
            F.mse_loss(F.linear(torch.tanh(h), p[4], p[5]), y).backward()
        for i, k in enumerate(order):
            dp_sync.mark_ready(i, p[k].grad)
        dp_sync.finish()  # the replicas' mean gradients averaged: the whole batch's
        opt.step()

    # Gather the shards (the regions' all-gather, outside autograd) and compare.
    full = [tp.gather_from_region(p[0].detach(), mesh, "tp", 0, extent=HIDDEN),
            tp.gather_from_region(p[1].detach(), mesh, "tp", 0, extent=HIDDEN),
            tp.gather_from_region(p[2].detach(), mesh, "tp", 1, extent=HIDDEN)] + [t.detach() for t in p[3:]]
    ref = single_process()
    worst = max(((a - b).abs().max() / b.abs().max()).item() for a, b in zip(full, ref))
    verdict = torch.tensor([worst])
    comm.allreduce(verdict, op=weft.MAX)
    ok = verdict.item() <= 1e-5
    if comm.rank == 0:
        print("tensor_parallel_torch: DP=%d x TP=%d%s, %d steps, worst relative error %.2g (tolerance 1e-05)"
              % (dp_size, tp_size, " with sequence parallelism" if sequence_parallel else "", STEPS, verdict.item()))
        print("tensor_parallel_torch: ok" if ok else "tensor_parallel_torch: FAILED")
    dp_sync.close()
    if tp_sync is not None:
        tp_sync.close()
    mesh.close()
    comm.close()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
