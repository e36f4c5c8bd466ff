"""Single-process tests of the training.h family: the C struct layouts, names and enums, views
of weft-owned memory, and one-rank bucketers, ZeRO handles, regions and ring shifts (with one
rank every collective is a copy, so results are checked exactly)."""

import ctypes

import numpy as np
import pytest
import torch

import weft
from weft import _lib, _training


def solo():
    return weft.Comm(weft.get_unique_id(), 0, 1, timeout=30, name="solo")


def needs(name):
    return pytest.mark.skipif(not _lib.has(name), reason="the loaded libweft lacks %s" % name)


def test_struct_layouts_match_the_header():
    # LP64: sizeof/offsetof of capi/include/weft/training.h's structs, measured with a C compiler.
    assert ctypes.sizeof(_lib.weft_bucketer_config_t) == 56
    assert _lib.weft_bucketer_config_t.error_feedback.offset == 48
    assert _lib.weft_bucketer_config_t.op.offset == 24 and _lib.weft_bucketer_config_t.names.offset == 40
    assert ctypes.sizeof(_lib.weft_bucketer_stats_t) == 40
    assert ctypes.sizeof(_lib.weft_optimizer_config_t) == 40
    assert _lib.weft_optimizer_config_t.lr.offset == 12 and _lib.weft_optimizer_config_t.weight_decay.offset == 32
    z = _lib.weft_zero_config_t
    assert ctypes.sizeof(z) == 120 and z.error_feedback.offset == 112
    assert (z.optimizer.offset, z.groups.offset, z.group_bytes.offset, z.names.offset, z.grad_op.offset) == \
        (16, 56, 64, 72, 80)
    assert (z.max_grad_norm.offset, z.dynamic_loss_scale.offset, z.growth_interval.offset) == (88, 96, 108)
    assert ctypes.sizeof(_lib.weft_zero_step_info_t) == 40 and _lib.weft_zero_step_info_t.comm_elements.offset == 24
    assert ctypes.sizeof(_lib.weft_zero_memory_t) == 48
    assert _lib.TRAINING_FUNCTIONS <= set(_lib.PROTOTYPES) and len(_lib.TRAINING_FUNCTIONS) == 22


def test_names_and_enums():
    assert weft.as_wire("bf16") == weft.Wire.BF16 and weft.as_wire(2) == weft.Wire.FP8_E4M3
    assert weft.WIRE_FP8_BLOCK == 256
    with pytest.raises(weft.InvalidArgument, match="wire"):
        weft.as_wire("fp4")
    assert weft.as_region("seq_gather") == weft.Region.SEQ_GATHER and weft.as_region(5).name == "SEQ_REDUCE_SCATTER"
    with pytest.raises(weft.InvalidArgument, match="region"):
        weft.as_region("everything")
    # training.h's table.
    table = {"COPY": ("identity", "all-reduce"), "REDUCE": ("all-reduce", "identity"),
             "SCATTER": ("keep", "all-gather"), "GATHER": ("all-gather", "keep"),
             "SEQ_GATHER": ("all-gather", "reduce-scatter"), "SEQ_REDUCE_SCATTER": ("reduce-scatter", "all-gather")}
    for r in weft.Region:
        assert (weft.region_op(r, False), weft.region_op(r, True)) == table[r.name]
    assert [weft.chunk_range(5, 4, i) for i in range(4)] == [(0, 2), (2, 4), (4, 5), (5, 5)]
    assert weft.AdamW() == weft.AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    assert weft.Adam().weight_decay == 0.0 and weft.SGD(0.1, momentum=0.9).momentum == 0.9
    assert "lr=0.1" in repr(weft.SGD(0.1))
    o = weft.AdamW(lr=0.5, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.2)._c()
    assert (o.kind, o.lr, o.beta1, o.eps) == (2, 0.5, pytest.approx(0.8), pytest.approx(1e-6))


def test_memory_views():
    owner = object()
    a = np.arange(6, dtype=np.float32)
    v = _training._memory_view(a.ctypes.data, (2, 3), weft.FLOAT32, owner, readonly=True)
    assert v.shape == (2, 3) and not v.flags.writeable and v.base.owner is owner
    np.testing.assert_array_equal(v.ravel(), a)
    bits = np.array([0x3F80, 0x4000], np.uint16)  # bfloat16 1.0, 2.0
    t = _training._memory_view(bits.ctypes.data, (2,), weft.BFLOAT16, owner, like="torch")
    assert t.dtype == torch.bfloat16 and t.tolist() == [1.0, 2.0]
    assert _training._memory_view(0, (0, 3), weft.FLOAT16, owner).shape == (0, 3)
    with pytest.raises(weft.InvalidArgument, match="like"):
        _training._memory_view(a.ctypes.data, (6,), weft.FLOAT32, owner, like="jax")


@needs("weft_bucketer_create")
def test_one_rank_bucketer():
    with solo() as c:
        g = [np.arange(5, dtype=np.float32), torch.arange(3, dtype=torch.float64)]
        with weft.Bucketer(c, g, bucket_bytes=16, names=["a", "b"]) as b:
            assert b.num_buckets == 2 and b.bucket_of("b") == (1, 0) and b.names == ("a", "b")
            b.mark_ready(0)
            b.mark_ready("b", g[1])
            b.finish()
            np.testing.assert_array_equal(g[0], np.arange(5))
            assert b.stats().steps == 1 and "2 buckets" in repr(b)
        assert b.closed and repr(b) == "<weft.Bucketer closed>"
        with weft.Bucketer(c, {"w": np.ones(4, np.float32)}, reduction="reduce_scatter", op="sum") as b:
            b.mark_ready("w")
            b.finish()
            shard, off = b.shard(0)
            assert off == 0 and shard.tolist() == [1.0] * 4


@needs("weft_zero_create")
def test_one_rank_zero():
    with solo() as c, weft.Mesh(c, (1,), ("dp",)) as m:
        p = {"w": np.full((2, 2), 1.0, np.float32), "b": np.zeros(2, np.float32)}
        with weft.Zero(m, "dp", p, stage=1, optimizer=weft.SGD(lr=0.5)) as z:
            assert (z.num_params, z.num_groups, z.group_of("b"), z.names) == (2, 1, 0, ("w", "b"))
            assert z.gather(0) is None and z.gather(0, async_op=True) is None
            z.grad_ready("b", np.ones(2, np.float32))
            z.grad_ready("w", torch.full((2, 2), 2.0))
            info = z.step()
            assert not info.skipped and info.grad_norm == pytest.approx(np.sqrt(4 * 4 + 2))
            np.testing.assert_array_equal(z.param("w"), np.zeros((2, 2)))  # 1 - 0.5 * 2
            np.testing.assert_array_equal(z.param(1, like="torch").numpy(), [-0.5, -0.5])
            assert z.memory().params > 0 and "stage 1" in repr(z)
        with pytest.raises(weft.InvalidArgument, match="closed"):
            z.step()


@needs("weft_region_apply")
def test_one_rank_regions_and_ring():
    with solo() as c, weft.Mesh(c, (1,), ("tp",)) as m:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        for r in weft.Region:
            for backward in (False, True):
                np.testing.assert_array_equal(weft.region_apply(m, "tp", r, backward, 1, x), x)
        np.testing.assert_array_equal(weft.ring_shift(m, "tp", 1, x), x)
        req = weft.ring_shift(m, 0, 3, torch.from_numpy(x), async_op=True)
        np.testing.assert_array_equal(req.wait().numpy(), x)
        import weft.torch_parallel as tp
        t = torch.from_numpy(x).requires_grad_(True)
        y = tp.reduce_scatter_to_sequence_region(tp.copy_to_region(t, m, "tp"), m, "tp")
        y.sum().backward()
        assert torch.equal(t.grad, torch.ones(2, 3))
        q = torch.randn(1, 4, 8)
        out = tp.ring_attention(q, q, q, m, "tp", causal=True)
        assert torch.allclose(out, tp.attention_reference(q, q, q, causal=True), atol=1e-6)
