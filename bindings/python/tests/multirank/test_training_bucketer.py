"""weft.Bucketer (training.h's gradient bucketer) across the ranks of a weftrun job: all-reduce and
reduce-scatter results on numpy arrays and torch tensors against numpy sums of every rank's
inputs (each rank computes them all), the bf16 wire within training.h's stated bound, and bad
input refused with weft errors naming the gradient."""

import numpy as np
import pytest
import torch

import weft
from weft import _lib


@pytest.fixture(autouse=True)
def _needs_bucketer():
    if not _lib.has("weft_bucketer_create"):
        pytest.skip("the loaded libweft lacks the training.h functions")


SIZES = [7, 1, 0, 300, 33]


def grad_values(rank, g, n, step):
    """Small integers: sums over up to 8 ranks, and their division by 2 or 4, are exact."""
    rng = np.random.default_rng(1000 * step + 10 * g + rank)
    return rng.integers(-4, 5, size=n).astype(np.float64)


def expected(world, g, n, step, op, dtype):
    total = sum(grad_values(r, g, n, step) for r in range(world.size))
    if op == "avg":  # weft.h: the sum, divided in the gradient's dtype (float32: in float32), rounded once
        return (total.astype(dtype) / dtype(world.size)).astype(np.float64)
    return total


@pytest.mark.parametrize("reduction", ["allreduce", "reduce_scatter"])
@pytest.mark.parametrize("op", ["sum", "avg"])
@pytest.mark.parametrize("bucket_bytes", [None, 64])
def test_numpy_results_equal_numpy_sums(world, reduction, op, bucket_bytes):
    dtypes = [np.float32, np.float32, np.float64, np.float64, np.float32]  # the dtype change starts a bucket
    grads = [np.zeros(n, dt) for n, dt in zip(SIZES, dtypes)]
    with weft.Bucketer(world, grads, bucket_bytes=bucket_bytes, op=op, reduction=reduction) as b:
        assert b.num_buckets >= (2 if bucket_bytes is None else 4)
        for step in range(2):
            for g, n in enumerate(SIZES):
                grads[g][...] = grad_values(world.rank, g, n, step)
            for g in reversed(range(len(SIZES))):  # any readiness order
                b.mark_ready(g)
            b.finish()
            for g, n in enumerate(SIZES):
                want = expected(world, g, n, step, op, dtypes[g])
                bucket, offset = b.bucket_of(g)
                if reduction == "allreduce":
                    np.testing.assert_array_equal(grads[g], want.astype(dtypes[g]))
                    continue
                shard, start = b.shard(bucket)
                assert shard.dtype == dtypes[g] and shard.ndim == 1
                lo, hi = max(offset, start), min(offset + n, start + len(shard))
                if lo < hi:  # the part of gradient g inside this rank's chunk of its bucket
                    np.testing.assert_array_equal(shard[lo - start:hi - start], want[lo - offset:hi - offset])
        st = b.stats()
        assert st.steps == 2 and st.wire_bytes > 0


def test_reduce_scatter_chunks_follow_torch_chunk(world):
    n = 10
    grads = [np.zeros(n, np.float32)]
    with weft.Bucketer(world, grads, op="sum", reduction="reduce_scatter") as b:
        grads[0][...] = np.arange(n) + world.rank
        b.mark_ready(0)
        b.finish()
        shard, start = b.shard(0)
        chunk = -(-n // world.size)
        lo, hi = min(world.rank * chunk, n), min((world.rank + 1) * chunk, n)
        assert (start, len(shard)) == (lo, hi - lo)
        want = sum(np.arange(n) + r for r in range(world.size))[lo:hi]
        np.testing.assert_array_equal(shard, want)
        t, start_t = b.shard(0, like="torch")
        assert start_t == start and torch.equal(t, torch.from_numpy(want.astype(np.float32)))
    with pytest.raises(weft.InvalidArgument, match="closed"):
        b.shard(0)


def test_torch_grads_and_names(world):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.zeros(4, 3)), torch.nn.Parameter(torch.zeros(5))]
    for p in params:
        p.grad = torch.zeros_like(p)
    names = ["fc.weight", "fc.bias"]
    with weft.Bucketer(world, {n: p.grad for n, p in zip(names, params)}, op="avg") as b:
        assert b.names == tuple(names)
        for step in range(2):
            for g, p in enumerate(params):
                p.grad.copy_(torch.from_numpy(grad_values(world.rank, g, p.numel(), step).reshape(p.shape)))
            b.mark_ready("fc.bias", params[1].grad)  # the .grad as it is now: the registered one
            b.mark_ready(0, params[0].grad)
            b.finish()
            for g, p in enumerate(params):
                want = expected(world, g, p.numel(), step, "avg", np.float32).reshape(tuple(p.shape))
                np.testing.assert_array_equal(p.grad.numpy(), want.astype(np.float32))


def test_bf16_wire_within_stated_bound(world):
    n = 700
    rng = [np.random.default_rng(77 + r) for r in range(world.size)]
    inputs = [(rg.standard_normal(n) * np.exp2(rg.integers(-6, 4, size=n))).astype(np.float32) for rg in rng]
    g = inputs[world.rank].copy()
    with weft.Bucketer(world, [g], op="sum", wire="bf16") as b:
        b.mark_ready(0)
        b.finish()
    stack = np.stack(inputs).astype(np.float64)
    s = stack.sum(axis=0)
    abs_sum = np.abs(stack).sum(axis=0)
    # training.h, all-reduce over a BF16 wire: u (sum |g_r| + |S|) + (nranks + 1) 2^-24 sum |g_r|, u = 2^-8
    bound = 2.0 ** -8 * (abs_sum + np.abs(s)) + (world.size + 1) * 2.0 ** -24 * abs_sum
    err = np.abs(g.astype(np.float64) - s)
    assert np.all(err <= bound), "worst error / bound = %.3f" % np.max(err / np.maximum(bound, 1e-300))
    assert np.max(err) > 0  # the wire did round


def test_bad_input_names_the_gradient(world):
    a, c = np.zeros(10, np.float32), np.zeros(5, np.float32)
    with weft.Bucketer(world, [a, c], names=["layer.weight", "layer.bias"]) as b:
        moved = np.zeros(10, np.float32)
        with pytest.raises(weft.InvalidArgument, match="layer.weight"):
            b.mark_ready(0, moved)  # a gradient that moved: refused, never reduced from stale memory
        b.mark_ready(0)
        with pytest.raises(weft.InvalidArgument, match="(?i)twice") as e:
            b.mark_ready(0)
        assert "layer.weight" in str(e.value)
        with pytest.raises(weft.InvalidArgument, match="layer.bias"):
            b.finish()  # never marked (on every rank, so no rank is left waiting)
        b.mark_ready("layer.bias")
        b.finish()
        with pytest.raises(weft.InvalidArgument, match="all-reduce"):
            b.shard(0)  # no shards in all-reduce mode
        with pytest.raises(weft.InvalidArgument, match="nope"):
            b.mark_ready("nope")
        with pytest.raises(weft.InvalidArgument):
            b.mark_ready(2)


def test_reallocated_torch_grad_is_detected(world):
    p = torch.nn.Parameter(torch.zeros(6))
    p.grad = torch.ones(6)
    with weft.Bucketer(world, {"w": p.grad}) as b:
        p.grad = torch.ones(6)  # the framework made a new .grad tensor: weft must be told, not read stale memory
        with pytest.raises(weft.InvalidArgument, match="w"):
            b.mark_ready(0, p.grad)


def test_binding_checks(world):
    with pytest.raises(weft.InvalidArgument, match="grads"):
        weft.Bucketer(world, [np.zeros(4, np.int32)])  # not floating point
    with pytest.raises(weft.InvalidArgument, match="wire"):
        weft.Bucketer(world, [np.zeros(4, np.float32)], wire="zip")
    with pytest.raises(weft.InvalidArgument, match="reduction"):
        weft.Bucketer(world, [np.zeros(4, np.float32)], reduction="gather")
    with pytest.raises(weft.InvalidArgument, match="SUM or weft.AVG"):
        weft.Bucketer(world, [np.zeros(4, np.float32)], op="max")
    with pytest.raises(weft.InvalidArgument, match="2 names"):
        weft.Bucketer(world, [np.zeros(4, np.float32)], names=["a", "b"])
    with pytest.raises(weft.InvalidArgument, match="single array"):
        weft.Bucketer(world, np.zeros(4, np.float32))
    with pytest.raises(weft.InvalidArgument, match="contiguous"):
        weft.Bucketer(world, [np.zeros((4, 4), np.float32)[:, 1]])
