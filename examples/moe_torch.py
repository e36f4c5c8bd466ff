"""Trains a tiny MoE layer expert-parallel over weft for a few steps, and checks itself against
one process training the same layer densely (every expert, every token, plain torch autograd).

    build/bin/weftrun -n 4 /usr/bin/python3 examples/moe_torch.py

Each rank holds the router (replicated) and its experts (E = 6 over the ranks by torch.chunk's
rule), routes its own batch, dispatches the tokens to the experts' ranks, runs its experts on
what it received and combines the results back (weft.torch_moe). The loss is the sum over ranks
of each rank's squared error / all tokens; the experts' gradients arrive complete on their
ranks through combine's and dispatch's backward passes, the router's are summed over ranks.
Exit status 0 when every step's loss and every parameter a rank holds match the dense run to
1e-5 relative (the layer is also bitwise equal to its reference: tests/multirank/test_moe.py).
"""

import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bindings" / "python"))

import torch  # noqa: E402

import weft  # noqa: E402
from weft.torch_moe import MoELayer, expert_mlp, init_parameters  # noqa: E402

E, H, F, K, TOKENS, STEPS, LR, SEED = 6, 16, 32, 2, 24, 5, 0.5, 3


def batch(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.randn(TOKENS, H, generator=g)
    return x, torch.tanh(x.flip(1)) * 0.5  # a target the layer can learn a little of


def dense_step(p, xs, ts, total):
    """One process: the whole layer on every rank's tokens; returns the loss (p's .grad set)."""
    loss = 0.0
    for x, t in zip(xs, ts):
        probs = torch.softmax(torch.nn.functional.linear(x, p["router"]), dim=-1)
        w, idx = torch.topk(probs, K, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(E):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            y = expert_mlp(x[tok], p["w1"][e], p["b1"][e], p["w2"][e], p["b2"][e])
            out = out.index_add(0, tok, w[tok, slot].unsqueeze(1) * y)
        loss = loss + ((out - t) ** 2).sum() / total
    loss.backward()
    return float(loss)


def rel(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-30))


def main():
    with weft.Comm.from_env(name="moe_torch") as comm, weft.Moe(comm, E, H) as moe:
        n, rank = comm.size, comm.rank
        layer = MoELayer(moe, F, K, seed=SEED, normalize=True)
        ref = {name: v.clone().requires_grad_(True) for name, v in init_parameters(E, H, F, SEED).items()}
        total = n * TOKENS
        worst = 0.0
        for step in range(STEPS):
            x, t = batch(rank, step)
            layer.zero_grad()
            local = ((layer(x) - t) ** 2).sum() / total
            local.backward()
            layer.reduce_replicated_grads()
            loss = torch.tensor([float(local)])
            comm.allreduce(loss)
            with torch.no_grad():
                for p in layer.parameters():
                    p -= LR * p.grad
            data = [batch(r, step) for r in range(n)]
            for v in ref.values():
                v.grad = None
            ref_loss = dense_step(ref, [d[0] for d in data], [d[1] for d in data], total)
            with torch.no_grad():
                for v in ref.values():
                    v -= LR * v.grad
            errs = [abs(float(loss) - ref_loss) / ref_loss, rel(layer.router, ref["router"])]
            for e in layer.local:
                errs += [rel(layer.experts["%s_%d" % (name, e)], ref[name][e]) for name in ("w1", "b1", "w2", "b2")]
            worst = max(worst, max(errs))
            if rank == 0:
                print("step %d: loss %.6f (one process: %.6f), max relative difference %.2e"
                      % (step, float(loss), ref_loss, max(errs)))
        ok = torch.tensor([1.0 if worst <= 1e-5 else 0.0])
        comm.allreduce(ok, op=weft.MIN)
        if rank == 0:
            print("moe_torch: %s (%d ranks, experts per rank %s, worst relative difference %.2e)"
                  % ("OK" if float(ok) == 1.0 else "MISMATCH", n,
                     [sum(1 for e in range(E) if moe.expert_rank(e) == r) for r in range(n)], worst))
        return 0 if float(ok) == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
