"""weft.Comm collectives on torch CPU tensors (through __dlpack__) for every dtype torch and
weft share, against numpy references."""

import numpy as np
import pytest
import torch
from _helpers import OPS, Case, assert_values, reduce_ref, values

import weft

TORCH_CASES = [
    (Case("float64", np.float64, weft.FLOAT64), torch.float64),
    (Case("float32", np.float32, weft.FLOAT32), torch.float32),
    (Case("float16", np.float16, weft.FLOAT16), torch.float16),
    (Case("bfloat16", np.uint16, weft.BFLOAT16), torch.bfloat16),
    (Case("int8", np.int8, weft.INT8, floating=False), torch.int8),
    (Case("uint8", np.uint8, weft.UINT8, floating=False), torch.uint8),
    (Case("int32", np.int32, weft.INT32, floating=False), torch.int32),
    (Case("int64", np.int64, weft.INT64, floating=False), torch.int64),
]
IDS = [c.name for c, _ in TORCH_CASES]


def to_tensor(case, tdtype, vals):
    if tdtype == torch.bfloat16:
        return torch.tensor(np.asarray(vals, dtype=np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(np.asarray(vals).astype(case.storage))).clone()


def to_stored(case, t):
    """The tensor's data as the Case's storage (bf16 as its bits)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    return t.numpy().copy()


def check(case, t, expect):
    assert_values(case, to_stored(case, t), expect)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
@pytest.mark.parametrize("case,tdtype", TORCH_CASES, ids=IDS)
def test_allreduce(world, case, tdtype, op):
    for n in (0, 1, 7, 1000):
        vals = [values(case, r, n, op) for r in range(world.size)]
        t = to_tensor(case, tdtype, vals[world.rank])
        out = torch.zeros(n, dtype=tdtype)
        assert world.allreduce(t, out, op=op) is out
        expect = reduce_ref(case, vals, op)
        check(case, out, expect)
        world.allreduce(t, op=op)
        check(case, t, expect)


@pytest.mark.parametrize("case,tdtype", TORCH_CASES, ids=IDS)
def test_data_movement(world, case, tdtype):
    s, r = world.size, world.rank
    n = 5
    vals = [values(case, q, s * n, salt=11) for q in range(s)]
    mine = to_tensor(case, tdtype, vals[r])
    # broadcast
    b = mine.clone() if r == 0 else torch.zeros(s * n, dtype=tdtype)
    world.broadcast(b, root=0)
    check(case, b, vals[0])
    # allgather of the first block
    out = torch.zeros(s * n, dtype=tdtype)
    world.allgather(mine[:n], out)
    check(case, out, np.concatenate([v[:n] for v in vals]))
    # reduce_scatter (sum)
    rs = torch.zeros(n, dtype=tdtype)
    world.reduce_scatter(mine, rs)
    check(case, rs, reduce_ref(case, vals, weft.SUM)[r * n:(r + 1) * n])
    # alltoall
    a2a = torch.zeros(s * n, dtype=tdtype)
    world.alltoall(mine, a2a)
    check(case, a2a, np.concatenate([v[r * n:(r + 1) * n] for v in vals]))
    # gather / scatter at the last rank
    root = s - 1
    g = torch.zeros(s * n, dtype=tdtype) if r == root else None
    world.gather(mine[:n], g, root=root)
    if r == root:
        check(case, g, np.concatenate([v[:n] for v in vals]))
    sc = torch.zeros(n, dtype=tdtype)
    world.scatter(mine if r == root else None, sc, root=root)
    check(case, sc, vals[root][r * n:(r + 1) * n])
    # reduce (max) to rank 0
    red = torch.zeros(s * n, dtype=tdtype)
    world.reduce(mine, red if r == 0 else None, op=weft.MAX, root=0)
    if r == 0:
        check(case, red, reduce_ref(case, vals, weft.MAX))
    # send/recv between 0 and 1
    if s >= 2 and r in (0, 1):
        if r == 0:
            world.send(mine, 1)
        else:
            got = torch.zeros(s * n, dtype=tdtype)
            world.recv(got, 0)
            check(case, got, vals[0])


def test_multidimensional_and_views(world):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (world.rank + 1)
    world.allreduce(t)
    total = sum(range(1, world.size + 1))
    assert torch.equal(t, torch.arange(12, dtype=torch.float32).reshape(3, 4) * total)
    row = torch.zeros(3, 4, dtype=torch.float32)
    row[1] = world.rank + 1
    world.allreduce(row[1])  # a contiguous view: offset honoured, other rows untouched
    assert torch.equal(row[1], torch.full((4,), float(total))) and row[0].sum() == 0 and row[2].sum() == 0
    with pytest.raises(weft.InvalidArgument, match="contiguous"):
        world.allreduce(row[:, 1])


def test_untyped_torch_data(world):
    c = torch.tensor([complex(world.rank, 1)], dtype=torch.complex64)
    out = torch.zeros(world.size, dtype=torch.complex64)
    world.allgather(c, out)  # complex moves as bytes
    assert out.tolist() == [complex(r, 1) for r in range(world.size)]
    with pytest.raises(weft.Unsupported, match="complex"):
        world.allreduce(c)

