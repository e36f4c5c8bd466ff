"""Ring attention (context parallelism) in torch over weft.

The sequence is split in equal contiguous chunks over every rank (the mesh dim "cp"); each rank
holds its chunk of Q, K and V. weft.torch_parallel.ring_attention computes this rank's chunk of
softmax(Q K^T / sqrt(d)) V by rotating the key/value blocks around the ring with
weft.ring_shift: the next block's transfer runs (an async request) while this block's scores
are computed, and an online softmax (running max and sum, log-sum-exp) folds the blocks in.
Its backward rotates the dK/dV accumulators around the ring with the blocks. The all-gather form
(mode="allgather": K and V gathered along the sequence) is checked too.

Every rank then computes full attention on the whole sequence in this process and checks its
chunk of the output and of dQ, dK, dV against it (float32; tolerance 2 (S + 2d) u (1 + 2 max|s|),
derived in bindings/python/tests/multirank/test_torch_cp.py).

    build/bin/weftrun -n 4 /usr/bin/python3 examples/ring_attention.py
"""

import math
import os
import sys

try:
    import weft
except ImportError:  # running from a checkout: use bindings/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
    import weft

import torch

import weft.torch_parallel as tp

BATCH, HEADS, S_LOCAL, HEAD_DIM = 2, 4, 16, 32


def full_attention(q, k, v, causal):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def max_relative_error(got, ref):
    return ((got - ref).abs().max() / ref.abs().max()).item()


def main():
    comm = weft.Comm.from_env()
    mesh = weft.Mesh(comm, (comm.size,), ("cp",))
    cp, me = comm.size, mesh.coords[0]
    seq = S_LOCAL * cp
    g = torch.Generator().manual_seed(2024)
    q, k, v, dout = (torch.randn(BATCH, HEADS, seq, HEAD_DIM, generator=g) for _ in range(4))
    lo, hi = me * S_LOCAL, (me + 1) * S_LOCAL  # this rank's part of the sequence
    s_max = (q @ k.transpose(-1, -2)).abs().max().item() / math.sqrt(HEAD_DIM)
    tol = 2 * (seq + 2 * HEAD_DIM) * 2.0 ** -24 * (1 + 2 * s_max)
    worst = 0.0
    for mode in ("ring", "allgather"):
        for causal in (False, True):
            ql, kl, vl = (t[:, :, lo:hi].clone().requires_grad_(True) for t in (q, k, v))
            out = tp.ring_attention(ql, kl, vl, mesh, "cp", causal=causal, mode=mode)
            out.backward(dout[:, :, lo:hi])
            qf, kf, vf = (t.clone().requires_grad_(True) for t in (q, k, v))
            ref = full_attention(qf, kf, vf, causal)
            ref.backward(dout)
            for name, got, want in (("out", out.detach(), ref.detach()), ("dq", ql.grad, qf.grad),
                                    ("dk", kl.grad, kf.grad), ("dv", vl.grad, vf.grad)):
                err = max_relative_error(got, want[:, :, lo:hi])
                worst = max(worst, err)
                if not err <= tol:
                    print("ring_attention: rank %d, %s%s %s: relative error %.3g > %.3g"
                          % (me, mode, " causal" if causal else "", name, err, tol), file=sys.stderr)
                    sys.exit(1)
    # Every rank checked its own chunk; agree on the verdict before printing it.
    verdict = torch.tensor([worst])
    comm.allreduce(verdict, op=weft.MAX)
    if me == 0:
        print("ring_attention: CP=%d, sequence %d (%d per rank), worst relative error %.2g (tolerance %.2g)"
              % (cp, seq, S_LOCAL, verdict.item(), tol))
        print("ring_attention: ok")
    mesh.close()
    comm.close()


if __name__ == "__main__":
    main()
