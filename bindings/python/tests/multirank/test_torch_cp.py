"""Context parallelism in torch over weft: weft.torch_parallel.ring_attention with the sequence
split over CP = 2 and 4 ranks (mode "ring": key/value blocks rotated with weft.ring_shift, online
softmax forward, a backward that rotates dK/dV; mode "allgather": K and V gathered with
GatherFromSequenceRegion), causal and not, against full single-process attention written here,
torch.softmax(Q K^T / sqrt(d)) V, forward and the gradients of Q, K and V.

Tolerance (float32, u = 2^-24): every compared value is a sum of at most n = S + 2d rounded
products (S the whole sequence, d the head size: the score dot products, the softmax sum, the
value and gradient sums), so each implementation's error is at most about n u times the values'
scale, amplified through exp by at most the score range: kappa = 1 + 2 max|s| (s the scaled
scores). Two implementations differ by at most twice that:

    max |ring - full| / max |full| <= TOL = 2 n u kappa

(5e-5 to 8e-5 for the sizes here; the measured errors, printed under pytest -s, are below 1e-6).
WEFT_TEST_INJECT=1 corrupts one element before each comparison, which must then fail."""

import math

import pytest
import torch

import weft
import weft.torch_parallel as tp
from weft import _lib
from _helpers import assert_parity

B, H, S_LOCAL, D = 2, 2, 8, 16


@pytest.fixture(autouse=True)
def _needs_ring():
    if not _lib.has("weft_ring_shift"):
        pytest.skip("the loaded libweft lacks weft_ring_shift")


def cp_sizes(world):
    return [k for k in (2, 4) if k <= world.size and world.size % k == 0]


def full_attention(q, k, v, causal):
    """The single-process reference."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def tolerance(q, k):
    s = (q @ k.transpose(-1, -2)).abs().max().item() / math.sqrt(q.shape[-1])
    n = q.shape[-2] + 2 * q.shape[-1]
    return 2 * n * 2.0 ** -24 * (1 + 2 * s)


@pytest.mark.parametrize("mode", ["ring", "allgather"])
@pytest.mark.parametrize("causal", [False, True])
def test_ring_attention_equals_full_attention(world, mode, causal):
    for cp in cp_sizes(world):
        with weft.Mesh(world, (world.size // cp, cp), ("dp", "cp")) as mesh:
            me = mesh.coords[1]
            S = S_LOCAL * cp
            g = torch.Generator().manual_seed(7 * cp + causal)
            q, k, v, dout = (torch.randn(B, H, S, D, generator=g) for _ in range(4))
            tol = tolerance(q, k)
            # The reference, on the whole sequence.
            qf, kf, vf = (t.clone().requires_grad_(True) for t in (q, k, v))
            of = full_attention(qf, kf, vf, causal)
            of.backward(dout)
            # This rank's chunk of the sequence through weft.
            lo, hi = me * S_LOCAL, (me + 1) * S_LOCAL
            ql, kl, vl = (t[:, :, lo:hi].clone().requires_grad_(True) for t in (q, k, v))
            ol = tp.ring_attention(ql, kl, vl, mesh, "cp", causal=causal, mode=mode)
            ol.backward(dout[:, :, lo:hi])
            label = "CP=%d %s%s" % (cp, mode, " causal" if causal else "")
            assert_parity(label + " out", ol, of[:, :, lo:hi], tol)
            for name, got, ref in (("dq", ql.grad, qf.grad), ("dk", kl.grad, kf.grad), ("dv", vl.grad, vf.grad)):
                assert_parity("%s %s" % (label, name), got, ref[:, :, lo:hi], tol)


def test_ring_exchange(world):
    with weft.Mesh(world, (world.size,), ("cp",)) as mesh:
        me, n = mesh.coords[0], mesh.shape[0]
        a = torch.full((2, 3), float(me))
        b = torch.arange(4, dtype=torch.float32) + 10 * me
        ra, rb = tp.ring_exchange([a, b], mesh, "cp")
        assert torch.equal(ra, torch.full((2, 3), float((me - 1) % n)))
        assert torch.equal(rb, torch.arange(4, dtype=torch.float32) + 10 * ((me - 1) % n))
        req = tp.ring_exchange([a], mesh, "cp", shift=-1, async_op=True)
        (back,) = req.wait()
        assert torch.equal(back, torch.full((2, 3), float((me + 1) % n)))


def test_ring_attention_rejects_bad_mode(world):
    with weft.Mesh(world, (world.size,), ("cp",)) as mesh:
        x = torch.zeros(1, 2, 4)
        with pytest.raises(ValueError, match="mode"):
            tp.ring_attention(x, x, x, mesh, "cp", mode="zigzag")
        with pytest.raises(weft.InvalidArgument, match="nodim"):
            tp.ring_attention(x, x, x, mesh, "nodim")
