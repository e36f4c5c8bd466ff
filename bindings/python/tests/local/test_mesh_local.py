"""Single-process tests of the mesh.h family: placements and layouts, the C struct layouts, how
numpy arrays and torch tensors become weft_tensor_t views, and one-rank meshes, sharded
tensors, redistribution, plans and checkpoints."""

import ctypes
import json
import os
import struct

import numpy as np
import pytest
import torch

import weft
from weft import _lib, _sharded


def solo():
    return weft.Comm(weft.get_unique_id(), 0, 1, timeout=30, name="solo")


def needs(name):
    return pytest.mark.skipif(not _lib.has(name), reason="the loaded libweft lacks %s" % name)


# ------------------------------------------------------------------ placements and layouts

def test_placements_compare_and_print():
    assert weft.Shard(1) == weft.Shard(1) and weft.Shard(1) != weft.Shard(0)
    assert weft.Replicate() == weft.Replicate() and weft.Replicate() != weft.Shard(0)
    assert weft.Partial() == weft.Partial("sum") == weft.Partial(weft.SUM) != weft.Partial("max")
    assert len({weft.Shard(0), weft.Shard(0), weft.Replicate(), weft.Partial("avg")}) == 3
    assert repr(weft.Layout(weft.Shard(0), weft.Replicate(), weft.Partial("avg"))) == \
        "Layout(Shard(0), Replicate(), Partial('avg'))"
    assert weft.Layout([weft.Shard(2)]) == (weft.Shard(2),)
    with pytest.raises(AttributeError):
        weft.Shard(0).dim = 3
    with pytest.raises(weft.InvalidArgument):
        weft.Shard(-1)
    with pytest.raises(weft.InvalidArgument):
        weft.Partial("xor")
    with pytest.raises(weft.InvalidArgument, match="layout entry 1"):
        weft.Layout([weft.Shard(0), "R"])


def test_placement_c_values():
    p = weft.Shard(3)._c()
    assert (p.kind, p.dim) == (1, 3)
    p = weft.Partial("max")._c()
    assert (p.kind, p.op) == (2, int(weft.MAX))
    assert weft.Replicate()._c().kind == 0
    for pl in (weft.Shard(2), weft.Replicate(), weft.Partial("min")):
        assert weft.Placement._from_c(pl._c()) == pl


def test_struct_layouts_match_the_header():
    # LP64: checked against sizeof/offsetof of capi/include/weft/mesh.h and common.h.
    assert ctypes.sizeof(_lib.weft_tensor_t) == 48
    assert _lib.weft_tensor_t.shape.offset == 24 and _lib.weft_tensor_t.byte_offset.offset == 40
    assert ctypes.sizeof(_lib.weft_placement_t) == 12
    assert ctypes.sizeof(_lib.weft_redistribute_step_t) == 48
    assert _lib.weft_redistribute_step_t.to.offset == 20
    assert _lib.weft_redistribute_step_t.bytes_sent.offset == 32
    assert ctypes.sizeof(_lib.weft_mesh_config_t) == 24
    assert ctypes.sizeof(_lib.weft_sharded_config_t) == 16
    assert ctypes.sizeof(_lib.weft_checkpoint_config_t) == 16
    assert _lib.MESH_FUNCTIONS <= set(_lib.PROTOTYPES) and len(_lib.MESH_FUNCTIONS) == 24


# ------------------------------------------------------------------ views of numpy and torch memory

def test_numpy_views():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = _sharded._view(a, None, "local")
    assert (v.shape, v.strides, v.dtype, v.ptr) == ((4, 6), (6, 1), weft.FLOAT32, a.ctypes.data)
    assert v.c.ndim == 2 and v.c.strides[0] == 6 and v.c.device_type == _lib.DEVICE_CPU
    t = a.T  # strided: strides in bytes (4, 24) -> elements (1, 6)
    v = _sharded._view(t, None, "local")
    assert (v.shape, v.strides) == ((6, 4), (1, 6))
    s = a[1:, ::2]
    v = _sharded._view(s, None, "local")
    assert (v.shape, v.strides, v.ptr) == ((3, 3), (6, 2), a.ctypes.data + 6 * 4)
    v = _sharded._view(np.array(3.0), None, "local")  # a 0-d array: one element
    assert (v.shape, v.strides, v.c.ndim) == ((), (), 0)
    bf = np.zeros((2, 3), np.uint16)
    assert _sharded._view(bf, "bfloat16", "local").dtype == weft.BFLOAT16
    assert _sharded._view(np.zeros(3, np.uint8), weft.FP8_E5M2, "local").dtype == weft.FP8_E5M2
    assert _sharded._view(np.zeros(3, np.int64), None, "local").dtype == weft.INT64
    ro = np.zeros(3)
    ro.setflags(write=False)
    assert _sharded._view(ro, None, "local").readonly


def test_numpy_views_refused():
    raw = np.zeros(40, np.uint8)
    odd = np.lib.stride_tricks.as_strided(raw.view(np.float32), shape=(3,), strides=(6,))
    with pytest.raises(weft.InvalidArgument, match="not a multiple of the 4-byte item size"):
        _sharded._view(odd, None, "local")
    with pytest.raises(weft.InvalidArgument, match="negative"):
        _sharded._view(np.zeros(4)[::-1], None, "local")
    with pytest.raises(weft.InvalidArgument, match="not a weft dtype"):
        _sharded._view(np.zeros(4, np.uint16), None, "local")
    with pytest.raises(weft.InvalidArgument, match="cannot reinterpret"):
        _sharded._view(np.zeros(4, np.float32), "bfloat16", "local")
    with pytest.raises(weft.InvalidArgument, match="cannot be sharded"):
        _sharded._view(np.zeros(4, np.complex64), None, "local")
    with pytest.raises(weft.InvalidArgument, match="big-endian"):
        _sharded._view(np.zeros(4, ">f4"), None, "local")
    with pytest.raises(weft.InvalidArgument, match="neither a numpy array nor a torch tensor"):
        _sharded._view([1.0, 2.0], None, "local")


def test_torch_views():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    v = _sharded._view(t, None, "local")
    assert (v.shape, v.strides, v.ptr, v.dtype) == ((3, 4), (4, 1), t.data_ptr(), weft.FLOAT32)
    v = _sharded._view(t.t(), None, "local")  # no copy: strides describe the transpose
    assert (v.shape, v.strides, v.ptr) == ((4, 3), (1, 4), t.data_ptr())
    v = _sharded._view(t[1:, 2:], None, "local")
    assert v.ptr == t.data_ptr() + (4 + 2) * 4 and v.strides == (4, 1)
    assert _sharded._view(torch.zeros(2, dtype=torch.bfloat16), None, "local").dtype == weft.BFLOAT16
    assert _sharded._view(torch.zeros(2, dtype=torch.uint8), "fp8_e4m3", "local").dtype == weft.FP8_E4M3
    g = torch.zeros(3, requires_grad=True)
    assert _sharded._view(g, None, "local").ptr == g.data_ptr()
    with pytest.raises(weft.InvalidArgument):
        _sharded._view(torch.zeros(2, dtype=torch.complex64), None, "local")
    with pytest.raises(weft.InvalidArgument, match="cannot reinterpret"):
        _sharded._view(torch.zeros(2), "int32", "local")


# ------------------------------------------------------------------ one-rank meshes

@needs("weft_mesh_create")
def test_one_rank_mesh():
    with solo() as c, weft.Mesh(c, (1, 1), ("dp", "tp")) as m:
        assert (m.shape, m.names, m.ndim, m.size) == ((1, 1), ("dp", "tp"), 2, 1)
        assert m.is_member and m.coords == (0, 0) and m.mesh_rank == 0
        assert m.dim_index("tp") == 1 and m.parent_rank(0) == 0 and m.parent_ranks == (0,)
        with pytest.raises(weft.InvalidArgument, match="nope"):
            m.dim_index("nope")
        tp = m.comm("tp")
        assert tp.borrowed and tp.size == 1 and m.comm(1) is tp
        x = np.arange(3.0)
        tp.allreduce(x)
        assert list(x) == [0.0, 1.0, 2.0]
        whole = m.comm()
        assert whole.size == 1 and m.comm("dp", "tp") is whole
        tp.close()  # detaches only: the mesh still owns the handle
        assert tp.closed and m.comm("tp").size == 1
        assert "dp=1 x tp=1" in repr(m)
        assert m.local_shape([weft.Shard(0), weft.Shard(1)], (5, 3)) == (5, 3)
        assert weft.local_box(m, {"tp": weft.Shard(1)}, (5, 3)) == ((5, 3), (0, 0))
        with pytest.raises(weft.InvalidArgument, match="2 dims"):
            weft.local_shape(m, [weft.Shard(0)], (4,))
    assert m.closed and tp.closed
    with pytest.raises(weft.InvalidArgument, match="closed"):
        m.comm("dp")


@needs("weft_mesh_create")
def test_default_names_and_errors():
    with solo() as c:
        with weft.Mesh(c, 1) as m:
            assert m.names == ("d0",) and m.shape == (1,)
        with pytest.raises(weft.InvalidArgument):
            weft.Mesh(c, (2,))  # product differs from the number of ranks
        with pytest.raises(weft.InvalidArgument):
            weft.Mesh(c, (1, 1), ("a", "a"))
        with pytest.raises(weft.InvalidArgument):
            weft.Mesh(c, (1,), ranks=[3])
        with weft.Mesh(c, (1,), ("x",), ranks=[0]) as m:
            assert m.is_member


@needs("weft_redistribute")
def test_one_rank_sharded_tensor_and_redistribute():
    with solo() as c, weft.Mesh(c, (1,), ("dp",)) as m:
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        src = weft.ShardedTensor(m, (3, 4), [weft.Shard(0)], a, name="a")
        assert src.dtype == weft.FLOAT32 and src.local is a and src.local_shape == (3, 4)
        assert src.global_offset == (0, 0) and "'a'" in repr(src)
        view = src.local_view()
        assert view.data == a.ctypes.data and view.shape == (3, 4) and view.dtype == weft.FLOAT32
        assert view.strides in (None, (4, 1))
        dst = weft.ShardedTensor.zeros(m, (3, 4), [weft.Replicate()], "float32")
        assert weft.redistribute(src, dst) is dst.local
        np.testing.assert_array_equal(dst.local, a)
        # strided destination (a transposed Fortran-order buffer)
        f = np.zeros((4, 3), np.float32).T
        dst2 = weft.ShardedTensor(m, (3, 4), [weft.Replicate()], f)
        req = weft.redistribute(src, dst2, async_op=True)
        assert req.wait() is f
        np.testing.assert_array_equal(f, a)
        np.testing.assert_array_equal(weft.full(src), a)
        # set_local: the next buffer
        b = a + 100
        src.set_local(b)
        assert src.local is b
        weft.redistribute(src, dst)
        np.testing.assert_array_equal(dst.local, b)
        with pytest.raises(weft.InvalidArgument):
            src.set_local(np.zeros((2, 4), np.float32))
        p = weft.plan(src, dst)
        assert isinstance(p, weft.Plan) and all(isinstance(s, weft.Step) for s in p)
        assert str(p)
        with pytest.raises(weft.InvalidArgument, match="stream"):
            weft.redistribute(src, dst, stream="default")
        with pytest.raises(weft.WeftError):  # host memory takes no stream
            weft.redistribute(src, dst, stream=0x1234)
        assert _sharded._stream(None) is None and _sharded._stream(0) is None and _sharded._stream(5) == 5
        with pytest.raises(weft.InvalidArgument):  # wrong local shape
            weft.ShardedTensor(m, (3, 5), [weft.Shard(0)], a)
        ro = a.copy()
        ro.setflags(write=False)
        with pytest.raises(weft.InvalidArgument, match="read-only"):
            weft.redistribute(src, weft.ShardedTensor(m, (3, 4), [weft.Replicate()], ro))
        dst2.close()
        with pytest.raises(weft.InvalidArgument, match="closed"):
            weft.redistribute(src, dst2)
    assert src.closed and dst.closed  # closed with their mesh


@needs("weft_redistribute")
def test_one_rank_torch():
    with solo() as c, weft.Mesh(c, (1,), ("dp",)) as m:
        t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
        src = weft.ShardedTensor(m, (2, 3), [weft.Shard(1)], t)
        out = weft.full(src)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and torch.equal(out, t)
        dst = weft.ShardedTensor.zeros(m, (2, 3), [weft.Replicate()], "bfloat16", like="torch")
        weft.redistribute(src, dst)
        assert torch.equal(dst.local, t)
        tt = torch.zeros(3, 2).t()  # non-contiguous destination
        weft.redistribute(weft.ShardedTensor(m, (2, 3), [weft.Replicate()], t.float()),
                          weft.ShardedTensor(m, (2, 3), [weft.Replicate()], tt))
        assert torch.equal(tt, t.float())


# ------------------------------------------------------------------ one-rank checkpoints

def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


@needs("weft_checkpoint_save")
def test_one_rank_checkpoint(tmp_path):
    d = tmp_path / "ckpt"
    with solo() as c, weft.Mesh(c, (1,), ("dp",)) as m:
        w = np.arange(12, dtype=np.float32).reshape(3, 4)
        b = np.array([7, -8, 9], np.int64)
        tw = weft.ShardedTensor(m, (3, 4), [weft.Shard(0)], w)
        tb = weft.ShardedTensor(m, (3,), [weft.Replicate()], b)
        weft.save(c, d, {"w": tw, "b": tb}, fsync=False)
        assert (d / "index.weft").exists()
        w2 = np.zeros((4, 3), np.float32).T  # load into a strided array
        b2 = np.zeros(3, np.int64)
        weft.load(str(d), {"w": weft.ShardedTensor(m, (3, 4), [weft.Replicate()], w2),
                           "b": weft.ShardedTensor(m, (3,), [weft.Shard(0)], b2)})
        np.testing.assert_array_equal(w2, w)
        np.testing.assert_array_equal(b2, b)
        with pytest.raises(weft.WeftError, match="nope"):
            weft.load(d, {"nope": weft.ShardedTensor(m, (3,), [weft.Shard(0)], b2)})
        with pytest.raises(weft.WeftError):  # another global shape
            weft.load(d, {"b": weft.ShardedTensor(m, (2,), [weft.Shard(0)], np.zeros(2, np.int64))})
        # save again: the previous save's files are replaced
        weft.save(c, d, [("w", tw)], fsync=True)
    with weft.Checkpoint(d) as ck:
        assert len(ck) == 1 and ck.names() == ["w"] and "w" in ck
        t = ck["w"]
        assert (t.name, t.dtype, t.shape) == ("w", weft.FLOAT32, (3, 4)) and t.nshards >= 1
        assert ck[0] == t and ck[-1] == t and list(ck) == [t]
        ck.verify()
        ck.export_safetensors(tmp_path / "w.safetensors")
        assert "1 tensors" in repr(ck)
    assert ck.closed
    header, data = read_safetensors(tmp_path / "w.safetensors")
    assert header["w"]["dtype"] == "F32" and header["w"]["shape"] == [3, 4]
    lo, hi = header["w"]["data_offsets"]
    np.testing.assert_array_equal(np.frombuffer(data[lo:hi], np.float32).reshape(3, 4), w)


@needs("weft_checkpoint_verify")
def test_checkpoint_corruption_is_found(tmp_path):
    d = tmp_path / "ckpt"
    with solo() as c, weft.Mesh(c, (1,), ("dp",)) as m:
        x = np.arange(1000, dtype=np.float64)
        weft.save(c, d, {"x": weft.ShardedTensor(m, (1000,), [weft.Shard(0)], x)}, fsync=False)
        data_files = [p for p in d.iterdir() if p.name != "index.weft" and p.is_file()]
        assert data_files
        victim = max(data_files, key=lambda p: p.stat().st_size)
        raw = bytearray(victim.read_bytes())
        raw[-1] ^= 0xFF  # the last byte is a shard's (the padding between aligned shards is not checksummed)
        victim.write_bytes(bytes(raw))
        with weft.Checkpoint(d) as ck, pytest.raises(weft.WeftError) as e:
            ck.verify()
        assert victim.name in e.value.message or "x" in e.value.message
        with pytest.raises(weft.WeftError):
            weft.load(d, {"x": weft.ShardedTensor(m, (1000,), [weft.Shard(0)], np.zeros(1000))})
    with pytest.raises(weft.WeftError):
        weft.Checkpoint(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "index.weft").write_bytes(os.urandom(64))
    with pytest.raises(weft.WeftError):
        weft.Checkpoint(tmp_path / "bad")
