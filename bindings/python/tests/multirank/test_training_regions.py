"""weft.region_apply and weft.ring_shift (training.h's tensor/sequence/context parallel
communication) across the ranks of a weftrun job, on numpy arrays and torch tensors, against
numpy slices, concatenations and sums of every rank's input (each rank computes them all)."""

import numpy as np
import pytest
import torch

import weft
from weft import _lib


@pytest.fixture(autouse=True)
def _needs_regions():
    if not _lib.has("weft_region_apply"):
        pytest.skip("the loaded libweft lacks weft_region_apply / weft_ring_shift")


@pytest.fixture(scope="module")
def grid(world):
    """(size/2, 2) named (dp, tp) on an even number of ranks, else (1, size)."""
    shape = (world.size // 2, 2) if world.size % 2 == 0 else (1, world.size)
    m = weft.Mesh(world, shape, ("dp", "tp"))
    yield m
    m.close()


@pytest.fixture(scope="module")
def line(world):
    """Every rank on one dim named tp (4 ranks: 5 elements split 2, 2, 1, 0)."""
    m = weft.Mesh(world, (world.size,), ("tp",))
    yield m
    m.close()


def chunk(n, k, i):
    c = -(-n // k)
    return min(i * c, n), min((i + 1) * c, n)


def data(rank_in_group, shape, salt=0):
    """A tensor every rank can compute for any member: exact small values."""
    n = int(np.prod(shape))
    return ((np.arange(n) * 7 + 13 * rank_in_group + salt) % 23 - 11).astype(np.float64).reshape(shape)


def group(grid, dim="tp"):
    d = grid.dim_index(dim)
    return grid.shape[d], grid.coords[d]


def sl(a, axis, lo, hi):
    idx = [slice(None)] * a.ndim
    idx[axis] = slice(lo, hi)
    return a[tuple(idx)]


# training.h's table: (forward, backward) of each region.
OPS = {"COPY": ("identity", "all-reduce"), "REDUCE": ("all-reduce", "identity"), "SCATTER": ("keep", "all-gather"),
       "GATHER": ("all-gather", "keep"), "SEQ_GATHER": ("all-gather", "reduce-scatter"),
       "SEQ_REDUCE_SCATTER": ("reduce-scatter", "all-gather")}


# Every region and direction: what this rank's output is, from every member's input.
def expect(op, inputs, me, k, axis):
    if op == "identity":
        return inputs[me]
    if op == "all-reduce":
        return sum(inputs)
    if op == "keep":
        lo, hi = chunk(inputs[me].shape[axis], k, me)
        return sl(inputs[me], axis, lo, hi)
    if op == "all-gather":
        return np.concatenate(inputs, axis=axis)
    if op == "reduce-scatter":
        total = sum(inputs)
        lo, hi = chunk(total.shape[axis], k, me)
        return sl(total, axis, lo, hi)
    raise AssertionError(op)


@pytest.mark.parametrize("region", list(weft.Region))
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("extent,on", [(6, "grid"), (5, "grid"), (5, "line")])  # 5: uneven chunks
def test_every_region_numpy(request, region, backward, extent, on):
    grid = request.getfixturevalue(on)
    k, me = group(grid)
    op = OPS[region.name][1 if backward else 0]
    assert weft.region_op(region, backward) == op
    axis = 1
    full_shape = (3, extent, 2)

    def input_of(r):
        if op in ("all-gather",):  # a chunk of the whole extent
            lo, hi = chunk(extent, k, r)
            return data(r, (3, hi - lo, 2))
        return data(r, full_shape)

    inputs = [input_of(r) for r in range(k)]
    want = expect(op, inputs, me, k, axis)
    x = inputs[me].astype(np.float32)
    out = weft.region_apply(grid, "tp", region, backward, axis, x, extent=extent if op == "all-gather" else None)
    assert out.shape == want.shape and out.dtype == np.float32
    np.testing.assert_array_equal(out, want.astype(np.float32))
    # The same with a caller's output and a negative split_dim.
    out2 = np.full(want.shape, np.nan, np.float32)
    assert weft.region_apply(grid, grid.ndim - 1, region.name.lower(), backward, axis - 3, x, out2) is out2
    np.testing.assert_array_equal(out2, want.astype(np.float32))


def test_strided_views_async_and_in_place(grid):
    k, me = group(grid)
    big = data(me, (4, 12)).astype(np.float32)
    x = big[:, ::2]  # a strided view
    req = weft.region_apply(grid, "tp", "copy", True, 0, x, async_op=True)
    assert isinstance(req, weft.Request)
    want = sum(data(r, (4, 12))[:, ::2] for r in range(k))
    np.testing.assert_array_equal(req.wait(), want.astype(np.float32))
    y = np.ascontiguousarray(x)
    assert weft.region_apply(grid, "tp", "reduce", False, 0, y, y) is y  # all-reduce in place
    np.testing.assert_array_equal(y, want.astype(np.float32))


def test_torch_and_bf16_storage(grid):
    k, me = group(grid)
    t = torch.from_numpy(data(me, (2, 3)).astype(np.float32))
    out = weft.region_apply(grid, "tp", weft.Region.SEQ_GATHER, False, 0, t)
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (2 * k, 3)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([data(r, (2, 3)) for r in range(k)]).astype(np.float32))
    b = torch.from_numpy(data(me, (4,)).astype(np.float32)).to(torch.bfloat16)
    got = weft.region_apply(grid, "tp", "reduce", False, 0, b)
    assert got.dtype == torch.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), sum(data(r, (4,)) for r in range(k)).astype(np.float32))


def test_region_errors(grid):
    k, me = group(grid)
    x = np.zeros((4, 2), np.float32)
    with pytest.raises(weft.InvalidArgument, match="region"):
        weft.region_apply(grid, "tp", "shuffle", False, 0, x)
    with pytest.raises(weft.InvalidArgument, match="nodim"):
        weft.region_apply(grid, "nodim", "copy", False, 0, x)
    if k > 1:
        with pytest.raises(weft.InvalidArgument, match="out"):
            weft.region_apply(grid, "tp", "seq_gather", False, 0, x, np.zeros((4, 2), np.float32))  # wrong shape
    with pytest.raises(weft.InvalidArgument, match="dtype"):
        weft.region_apply(grid, "tp", "reduce", False, 0, x, np.zeros((4, 2), np.float64))


@pytest.mark.parametrize("shift", [1, -1, 2, 0])
def test_ring_shift(grid, shift):
    k, me = group(grid)
    send = data(me, (3, 5)).astype(np.float32)
    got = weft.ring_shift(grid, "tp", shift, send)
    np.testing.assert_array_equal(got, data((me - shift) % k, (3, 5)).astype(np.float32))
    # Async, on torch tensors, while "computing" on the current block.
    t = torch.from_numpy(send.copy())
    req = weft.ring_shift(grid, "tp", shift, t, torch.empty_like(t), async_op=True)
    busy = float(t.sum())  # the overlap: the current block is read meanwhile
    assert busy == float(send.sum())
    np.testing.assert_array_equal(req.wait().numpy(), data((me - shift) % k, (3, 5)).astype(np.float32))


def test_ring_shift_around_every_dim(grid):
    # The dp dim's ring is another group: its neighbours are the ranks with the same tp coordinate.
    d = grid.dim_index("dp")
    k, me = grid.shape[d], grid.coords[d]
    x = np.array([me, grid.coords[1]], np.int64)
    np.testing.assert_array_equal(weft.ring_shift(grid, "dp", 1, x), [(me - 1) % k, grid.coords[1]])


def test_ring_shift_errors(grid):
    a = np.zeros(6, np.float32)
    with pytest.raises(weft.InvalidArgument, match="overlap"):
        weft.ring_shift(grid, "tp", 1, a[:4], a[2:])
    with pytest.raises(weft.InvalidArgument, match="contiguous"):
        weft.ring_shift(grid, "tp", 1, np.zeros((3, 4), np.float32)[:, ::2], np.zeros(6, np.float32))
    with pytest.raises(weft.InvalidArgument, match="dtype"):
        weft.ring_shift(grid, "tp", 1, a, np.zeros(6, np.float64))
    ro = np.zeros(6, np.float32)
    ro.flags.writeable = False
    with pytest.raises(weft.InvalidArgument, match="read-only"):
        weft.ring_shift(grid, "tp", 1, a, ro)
    with pytest.raises(weft.InvalidArgument, match="read-only"):
        weft.region_apply(grid, "tp", "reduce", False, 0, a, ro)
