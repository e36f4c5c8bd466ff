"""Meshes, sharded tensors, redistribution and checkpoints across the ranks of a weftrun job
(4 by default; shapes are chosen from the job's size), on numpy arrays and torch tensors,
against numpy slices of the global tensor."""

import os
import shutil
import tempfile

import numpy as np
import pytest
import torch

import weft
from weft import _lib

S, R, P = weft.Shard, weft.Replicate, weft.Partial


@pytest.fixture(autouse=True)
def _needs_mesh():
    if not _lib.has("weft_redistribute"):
        pytest.skip("the loaded libweft lacks the mesh.h functions")


def chunk(n, k, i):
    """torch.chunk's rule, as weft.h states it: [start, stop) of piece i of n over k."""
    c = -(-n // k) if k else 0
    return min(i * c, n), min((i + 1) * c, n)


def glob(shape, dtype=np.float64, salt=0):
    """A global tensor every rank can compute: distinct, exact values."""
    n = int(np.prod(shape))
    return ((np.arange(n) * 3 + salt) % 1000 - 300).astype(dtype).reshape(shape)


def piece_of(g, mesh, layout):
    """The slice of global array g that this rank holds in layout on mesh."""
    shape, off = weft.local_box(mesh, layout, tuple(g.shape))
    return g[tuple(slice(o, o + s) for o, s in zip(off, shape))]


def piece(g, t):
    """The slice of global array g that tensor t's local piece holds."""
    return piece_of(g, t.mesh, t.layout)


def sharded(mesh, g, layout, name=None):
    """A ShardedTensor of global array g (numpy) in layout, filled with this rank's piece."""
    return weft.ShardedTensor(mesh, g.shape, layout, np.ascontiguousarray(piece_of(g, mesh, layout)), name=name)


@pytest.fixture(scope="module")
def line(world):
    """A 1-d mesh over every rank."""
    m = weft.Mesh(world, (world.size,), ("dp",))
    yield m
    m.close()


@pytest.fixture(scope="module")
def grid(world):
    """A 2-d mesh (2, size/2) named (dp, tp); skipped on odd sizes."""
    if world.size % 2:
        pytest.skip("a 2-d mesh needs an even number of ranks")
    m = weft.Mesh(world, (2, world.size // 2), ("dp", "tp"))
    yield m
    m.close()


# ------------------------------------------------------------------ meshes

def test_mesh_queries(world, grid):
    n, r = world.size, world.rank
    assert grid.shape == (2, n // 2) and grid.names == ("dp", "tp") and grid.size == n
    assert grid.is_member and grid.coords == divmod(r, n // 2) and grid.mesh_rank == r
    assert grid.parent_ranks == tuple(range(n)) and grid.dim_index("dp") == 0
    tp = grid.comm("tp")
    assert tp.size == n // 2 and tp.rank == grid.coords[1] and tp.borrowed
    x = np.array([r], np.int64)
    tp.allreduce(x)
    first = grid.coords[0] * (n // 2)
    assert x[0] == sum(range(first, first + n // 2))
    dp = grid.comm("dp")
    y = np.array([r], np.int64)
    dp.allreduce(y)
    assert dp.size == 2 and y[0] == grid.coords[1] * 2 + n // 2
    whole = grid.comm("dp", "tp")
    assert whole.size == n and whole.rank == r and grid.comm() is whole
    assert grid.comm(1) is tp
    whole.barrier()


def test_mesh_over_some_ranks(world):
    n, r = world.size, world.rank
    if n < 2:
        pytest.skip("needs 2 ranks")
    ranks = [n - 1, 0]  # mesh order differs from rank order
    with weft.Mesh(world, (2,), ("pp",), ranks=ranks) as m:
        assert m.shape == (2,) and m.parent_ranks == (n - 1, 0)
        assert m.is_member == (r in ranks)
        if r in ranks:
            assert m.mesh_rank == ranks.index(r) and m.coords == (ranks.index(r),)
            c = m.comm("pp")
            v = np.array([r + 1.0])
            c.allreduce(v)
            assert v[0] == n + 1.0
        else:
            assert m.coords is None and m.mesh_rank is None
            with pytest.raises(weft.InvalidArgument):
                m.comm("pp")
        # queries work everywhere
        assert weft.local_shape(m, [S(0)], (5,), mesh_rank=1) == (2,)


def test_local_shapes_follow_torch_chunk(world, line):
    n = world.size
    for size in (0, 1, 5, 7, 13):
        for i in range(n):
            lo, hi = chunk(size, n, i)
            shape, off = weft.local_box(line, [S(0)], (size, 3), mesh_rank=i)
            assert shape == (hi - lo, 3) and (off[0] == lo or hi == lo), (size, i, shape, off)
        assert weft.local_shape(line, [S(1)], (2, size)) == (2, chunk(size, n, world.rank)[1] -
                                                            chunk(size, n, world.rank)[0])


# ------------------------------------------------------------------ redistribution on one mesh

@pytest.mark.parametrize("dtype,wdtype", [(np.float64, None), (np.float32, None), (np.int64, None),
                                          (np.uint16, "bfloat16"), (np.uint8, "fp8_e4m3")])
@pytest.mark.parametrize("rows", [0, 1, 7, 33])
def test_shard_to_replicate(world, line, dtype, wdtype, rows):
    g = (np.arange(rows * 3) % 50).astype(dtype).reshape(rows, 3)
    shape, off = weft.local_box(line, [S(0)], g.shape)
    src = weft.ShardedTensor(line, g.shape, [S(0)], np.ascontiguousarray(g[off[0]:off[0] + shape[0]]), dtype=wdtype)
    dst = weft.ShardedTensor.zeros(line, g.shape, [R()], wdtype or dtype)
    assert weft.redistribute(src, dst) is dst.local
    np.testing.assert_array_equal(dst.local, g)
    steps = weft.plan(src, dst)
    if world.size > 1 and rows:
        gathers = [s for s in steps if s.kind == weft.StepKind.ALLGATHER]
        assert len(gathers) == 1, str(steps)
        s = gathers[0]
        assert (s.mesh_dim, s.dim_name, s.before, s.after) == (0, "dp", S(0), R())
        assert s.max_bytes_sent >= s.bytes_sent >= 0 and "all-gather over mesh dim 0 (dp)" in str(s)
        assert all(t.kind == weft.StepKind.LOCAL for t in steps if t is not s), str(steps)


def test_replicate_to_shard_and_back(world, line):
    g = glob((9, 5))
    rep = sharded(line, g, [R()])
    for layout in ([S(0)], [S(1)]):
        dst = weft.ShardedTensor.zeros(line, g.shape, layout, "float64")
        weft.redistribute(rep, dst)
        np.testing.assert_array_equal(dst.local, piece(g, dst))
        if world.size > 1:
            assert {s.kind for s in weft.plan(rep, dst)} <= {weft.StepKind.LOCAL}, str(weft.plan(rep, dst))


def test_shard_to_shard_is_all_to_all(world, line):
    g = glob((7, 6), np.float32, salt=1)
    src = sharded(line, g, [S(0)])
    dst = weft.ShardedTensor.zeros(line, g.shape, [S(1)], "float32")
    weft.redistribute(src, dst)
    np.testing.assert_array_equal(dst.local, piece(g, dst))
    if world.size > 1:
        assert weft.StepKind.ALLTOALL in [s.kind for s in weft.plan(src, dst)]


@pytest.mark.parametrize("op", ["sum", "max", "avg"])
def test_partial_to_replicate_and_shard(world, line, op):
    n, r = world.size, world.rank
    base = glob((6, 4), np.float64, salt=2)
    terms = [base * (q + 1) for q in range(n)]
    expect = {"sum": sum(terms), "max": np.max(terms, axis=0), "avg": sum(terms) / n}[op]
    for layout in ([R()], [S(0)]):
        src = weft.ShardedTensor(line, base.shape, [P(op)], terms[r].copy())
        dst = weft.ShardedTensor.zeros(line, base.shape, layout, "float64")
        weft.redistribute(src, dst)
        np.testing.assert_allclose(dst.local, piece(expect, dst), rtol=0, atol=1e-12)
        kinds = [s.kind for s in weft.plan(src, dst)]
        if n > 1:
            assert (weft.StepKind.ALLREDUCE if layout == [R()] else weft.StepKind.REDUCE_SCATTER) in kinds, kinds


def test_replicate_to_partial_keeps_the_value(world, line):
    g = glob((4, 3))
    rep = sharded(line, g, [R()])
    part = weft.ShardedTensor.zeros(line, g.shape, [P("sum")], "float64")
    weft.redistribute(rep, part)
    # SUM keeps the value on coordinate 0 and zeros elsewhere
    np.testing.assert_array_equal(part.local, g if line.mesh_rank == 0 else np.zeros_like(g))
    np.testing.assert_array_equal(weft.full(part), g)


def test_two_dim_mesh(world, grid):
    g = glob((10, 7), np.float32, salt=3)
    layouts = [[S(0), S(1)], [R(), S(0)], [S(1), R()], [S(0), S(0)], [R(), R()], [P("sum"), S(1)]]
    tensors = []
    for lay in layouts:
        if lay[0] == P("sum"):
            loc = np.ascontiguousarray(piece_of(g, grid, [R(), S(1)]))
            loc = loc if grid.coords[0] == 0 else np.zeros_like(loc)
            tensors.append(weft.ShardedTensor(grid, g.shape, lay, loc))
        else:
            tensors.append(sharded(grid, g, lay))
    for src in tensors:
        np.testing.assert_array_equal(weft.full(src), g)
        for lay in layouts[:5]:
            dst = weft.ShardedTensor.zeros(grid, g.shape, lay, "float32")
            weft.redistribute(src, dst)
            np.testing.assert_array_equal(dst.local, piece(g, dst), err_msg="%s -> %s" % (src.layout, lay))
            dst.close()


def test_strided_local_pieces(world, line):
    g = glob((8, 5), np.float64, salt=4)
    shape, off = weft.local_box(line, [S(1)], g.shape)
    # the source piece is a transposed Fortran-order copy, the destination a column slice
    fortran = np.asfortranarray(g[:, off[1]:off[1] + shape[1]])
    src = weft.ShardedTensor(line, g.shape, [S(1)], fortran)
    wide = np.zeros((8, 11), np.float64)
    dst = weft.ShardedTensor(line, g.shape, [R()], wide[:, ::2][:, :5])  # every other column
    weft.redistribute(src, dst)
    np.testing.assert_array_equal(dst.local, g)
    assert np.count_nonzero(wide[:, 1::2]) == 0  # the gaps are untouched


def test_async_redistribute(world, line):
    g = glob((11, 2))
    src = sharded(line, g, [S(0)])
    dst = weft.ShardedTensor.zeros(line, g.shape, [R()], "float64")
    req = weft.redistribute(src, dst, async_op=True)
    assert isinstance(req, weft.Request)
    assert req.wait() is dst.local
    np.testing.assert_array_equal(dst.local, g)
    reqs = [weft.redistribute(src, weft.ShardedTensor.zeros(line, g.shape, [R()], "float64"), async_op=True)
            for _ in range(3)]
    for out in weft.wait_all(reqs):
        np.testing.assert_array_equal(out, g)


def test_errors_are_raised_everywhere(world, line):
    g = glob((6,))
    src = sharded(line, g, [S(0)])
    with pytest.raises(weft.InvalidArgument):  # local shape differs from the layout's
        weft.ShardedTensor(line, (6,), [S(0)], np.zeros(7))
    bad = weft.ShardedTensor.zeros(line, (6,), [R()], "float32")
    with pytest.raises(weft.WeftError):  # dtypes differ: refused before communicating
        weft.redistribute(src, bad)
    other = weft.ShardedTensor.zeros(line, (5,), [R()], "float64")
    with pytest.raises(weft.WeftError):
        weft.redistribute(src, other)
    with pytest.raises(weft.WeftError):
        weft.ShardedTensor(line, (6,), [P("prod")], np.zeros(piece(g, src).shape))
    world.barrier()


# ------------------------------------------------------------------ between meshes

def test_mesh_to_mesh(world, line):
    n, r = world.size, world.rank
    if n < 2:
        pytest.skip("needs 2 ranks")
    small_ranks = list(range(1, n)) if n > 2 else [1]
    with weft.Mesh(world, (len(small_ranks),), ("pp",), ranks=small_ranks) as small:
        g = glob((9, 4), np.float32, salt=5)
        src = sharded(line, g, [S(0)])
        for lay in ([R()], [S(1)], [S(0)]):
            if small.is_member:
                dst = weft.ShardedTensor.zeros(small, g.shape, lay, "float32")
            else:
                dst = weft.ShardedTensor(small, g.shape, lay, None, dtype="float32")  # a descriptor
            out = weft.redistribute(src, dst)
            if small.is_member:
                np.testing.assert_array_equal(out, piece(g, dst))
            else:
                assert out is None and dst.local is None
            assert weft.plan(src, dst)  # any rank involved can ask
        # and back: from the small mesh to every rank
        if small.is_member:
            back_src = sharded(small, g, [S(1)])
        else:
            back_src = weft.ShardedTensor(small, g.shape, [S(1)], None, dtype="float32")
        back = weft.ShardedTensor.zeros(line, g.shape, [S(0)], "float32")
        weft.redistribute(back_src, back)
        np.testing.assert_array_equal(back.local, piece(g, back))
        whole = weft.full(back_src)  # collective over the small mesh's members only
        if small.is_member:
            np.testing.assert_array_equal(whole, g)
        else:
            assert whole is None


def test_two_meshes_of_different_shapes(world, grid):
    g = glob((6, 6), np.float64, salt=6)
    with weft.Mesh(world, (world.size,), ("all",)) as flat:
        src = sharded(grid, g, [S(0), S(1)])
        dst = weft.ShardedTensor.zeros(flat, g.shape, [S(1)], "float64")
        weft.redistribute(src, dst)
        np.testing.assert_array_equal(dst.local, piece(g, dst))


# ------------------------------------------------------------------ torch tensors

TORCH_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.float16]


@pytest.mark.parametrize("tdtype", TORCH_DTYPES, ids=str)
def test_torch_shard_to_replicate(world, line, tdtype):
    g = torch.arange(7 * 3).reshape(7, 3).to(tdtype)
    shape, off = weft.local_box(line, [S(0)], tuple(g.shape))
    src = weft.ShardedTensor(line, tuple(g.shape), [S(0)], g[off[0]:off[0] + shape[0]].clone())
    out = weft.full(src)
    assert isinstance(out, torch.Tensor) and out.dtype == tdtype and torch.equal(out, g)
    dst = weft.ShardedTensor.zeros(line, tuple(g.shape), [S(1)], src.dtype, like=src.local)
    weft.redistribute(src, dst)
    sh, of = weft.local_box(line, [S(1)], tuple(g.shape))
    assert torch.equal(dst.local, g[:, of[1]:of[1] + sh[1]])


def test_torch_views_and_mesh_to_mesh(world, line):
    n = world.size
    g = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    shape, off = weft.local_box(line, [S(1)], (5, 8))
    # a non-contiguous local piece: the transpose of a (cols, 5) tensor
    local = g[:, off[1]:off[1] + shape[1]].t().contiguous().t()
    assert not local.is_contiguous() or shape[1] <= 1
    src = weft.ShardedTensor(line, (5, 8), [S(1)], local)
    ranks = [0] if n == 1 else [n - 1, 0]
    with weft.Mesh(world, (len(ranks),), ("x",), ranks=ranks) as pair:
        dst = (weft.ShardedTensor.zeros(pair, (5, 8), [S(0)], "float32", like="torch") if pair.is_member
               else weft.ShardedTensor(pair, (5, 8), [S(0)], None, dtype=torch.float32))
        weft.redistribute(src, dst)
        if pair.is_member:
            sh, of = weft.local_box(pair, [S(0)], (5, 8))
            assert torch.equal(dst.local, g[of[0]:of[0] + sh[0]])


# ------------------------------------------------------------------ checkpoints

@pytest.fixture
def ckpt_dir(world):
    """A directory shared by every rank (made on rank 0, its path broadcast), removed after."""
    buf = np.zeros(512, np.uint8)
    path = None
    if world.rank == 0:
        path = tempfile.mkdtemp(prefix="weft-py-ckpt-")
        raw = path.encode()
        buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    world.broadcast(buf, root=0)
    path = bytes(buf).rstrip(b"\0").decode()
    yield path
    world.barrier()
    if world.rank == 0:
        shutil.rmtree(path, ignore_errors=True)


def test_checkpoint_save_on_one_mesh_load_on_another(world, line, ckpt_dir):
    if not _lib.has("weft_checkpoint_save"):
        pytest.skip("the loaded libweft lacks the checkpoint functions")
    n, r = world.size, world.rank
    w = glob((9, 4), np.float32, salt=7)
    b = np.arange(5, dtype=np.int64) * 11
    base = glob((3, 3), np.float64, salt=8)
    tensors = {
        "layer.w": sharded(line, w, [S(0)]),
        "layer.b": sharded(line, b, [R()]),
        "partial": weft.ShardedTensor(line, base.shape, [P("sum")], base * (r + 1)),
    }
    solo = weft.Mesh(world, (1,), ("solo",), ranks=[0])  # collective; only rank 0 is a member
    if r == 0:
        tensors["only_rank0"] = weft.ShardedTensor(solo, (2,), [R()], np.array([1.5, -2.5]))
    weft.save(world, ckpt_dir, tensors, fsync=False)
    solo.close()
    world.barrier()
    assert os.path.exists(os.path.join(ckpt_dir, "index.weft"))

    # load on a 2-d mesh (or the line again on odd sizes), in other layouts
    if n % 2 == 0:
        other = weft.Mesh(world, (2, n // 2), ("dp", "tp"))
        lw, lb = [R(), S(1)], [S(0), R()]
    else:
        other = weft.Mesh(world, (n,), ("dp",))
        lw, lb = [S(1)], [S(0)]
    with other:
        tw = weft.ShardedTensor.zeros(other, w.shape, lw, "float32")
        tb = weft.ShardedTensor.zeros(other, b.shape, lb, "int64")
        tp = weft.ShardedTensor.zeros(other, base.shape, [R()] * other.ndim, "float64")
        t0 = weft.ShardedTensor.zeros(other, (2,), [R()] * other.ndim, "float64")
        weft.load(ckpt_dir, {"layer.w": tw, "layer.b": tb, "partial": tp, "only_rank0": t0})
        np.testing.assert_array_equal(tw.local, piece(w, tw))
        np.testing.assert_array_equal(tb.local, piece(b, tb))
        np.testing.assert_allclose(tp.local, base * sum(range(1, n + 1)))
        np.testing.assert_array_equal(t0.local, [1.5, -2.5])

    # load on fewer ranks: only the members of a 1-rank mesh read (load is not collective)
    with weft.Mesh(world, (1,), ("one",), ranks=[n - 1]) as one:
        if one.is_member:
            whole = weft.ShardedTensor.zeros(one, w.shape, [R()], "float32")
            weft.load(ckpt_dir, {"layer.w": whole})
            np.testing.assert_array_equal(whole.local, w)
    world.barrier()

    if r == 0:
        with weft.Checkpoint(ckpt_dir) as ck:
            info = {t.name: t for t in ck}
            assert set(info) == {"layer.w", "layer.b", "partial", "only_rank0"}
            assert info["layer.w"].dtype == weft.FLOAT32 and info["layer.w"].shape == (9, 4)
            assert info["layer.b"].shape == (5,) and info["layer.b"].nshards == 1  # replicated: stored once
            assert 1 <= info["layer.w"].nshards <= n
            ck.verify()
            out = os.path.join(ckpt_dir + "-export.safetensors")
            ck.export_safetensors(out)
        import json
        import struct
        with open(out, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
            data = f.read()
        os.unlink(out)
        lo, hi = header["layer.w"]["data_offsets"]
        np.testing.assert_array_equal(np.frombuffer(data[lo:hi], np.float32).reshape(9, 4), w)
        assert header["layer.b"]["dtype"] == "I64"
    world.barrier()


def test_checkpoint_corruption_names_the_file(world, line, ckpt_dir):
    if not _lib.has("weft_checkpoint_verify"):
        pytest.skip("the loaded libweft lacks the checkpoint functions")
    g = glob((64,), np.float64, salt=9)
    t = sharded(line, g, [S(0)])
    weft.save(world, ckpt_dir, {"g": t}, fsync=False)
    world.barrier()
    if world.rank == 0:
        files = sorted((os.path.getsize(os.path.join(ckpt_dir, f)), f) for f in os.listdir(ckpt_dir)
                       if f != "index.weft")
        size, victim = files[-1]
        with open(os.path.join(ckpt_dir, victim), "r+b") as f:  # its last byte: a shard's, not padding
            f.seek(size - 1)
            byte = f.read(1)
            f.seek(size - 1)
            f.write(bytes([byte[0] ^ 0xFF]))
    world.barrier()
    with weft.Checkpoint(ckpt_dir) as ck:
        with pytest.raises(weft.WeftError) as e:
            ck.verify()
    assert "g" in e.value.message
    world.barrier()
