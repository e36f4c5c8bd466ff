"""torch.distributed over backend "weft": init_process_group under weftrun, every
ProcessGroup method through the public torch.distributed API, futures, errors, subgroups,
and DDP parity with single-process training (gloo as the control)."""

import datetime
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from _helpers import under_launcher
from torch.nn.parallel import DistributedDataParallel as DDP

import weft
import weft.torch as wt

pytestmark = pytest.mark.skipif(not under_launcher(), reason="multi-rank test: run under weftrun")

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64]


@pytest.fixture(scope="module", autouse=True)
def process_group():
    dist.init_process_group("weft", timeout=datetime.timedelta(seconds=60))
    yield dist.group.WORLD
    dist.destroy_process_group()


def rank_size():
    return dist.get_rank(), dist.get_world_size()


def test_backend(process_group):
    r, s = rank_size()
    assert dist.get_backend() == "weft"
    assert isinstance(process_group, wt.ProcessGroupWeft)
    assert process_group._get_backend_name() == "weft"
    comm = process_group.comm
    assert (comm.rank, comm.size) == (r, s)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_ops(dtype):
    r, s = rank_size()
    base = torch.tensor([1, 2, 3, -1 if dtype != torch.uint8 else 0], dtype=torch.float64)
    ranks = [base + q for q in range(s)]
    cases = [(dist.ReduceOp.SUM, torch.stack(ranks).sum(0)), (dist.ReduceOp.MIN, torch.stack(ranks).min(0)[0]),
             (dist.ReduceOp.MAX, torch.stack(ranks).max(0)[0])]
    for op, expect in cases:
        t = (base + r).to(dtype)
        dist.all_reduce(t, op=op)
        assert torch.equal(t.double(), expect.to(dtype).double()), (op, t, expect)
    t = torch.full((3,), 1 + r % 2, dtype=dtype)
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    assert torch.all(t.double() == float(2 ** (s // 2)))
    if dtype.is_floating_point:
        t = torch.full((2,), float(2 * r), dtype=dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert torch.all(t.double() == float(s - 1))


def test_unsupported_op_and_device():
    with pytest.raises(weft.Unsupported, match="BAND"):
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)
    with pytest.raises(weft.Unsupported, match="bool"):
        dist.all_reduce(torch.ones(2, dtype=torch.bool))


def test_collectives():
    r, s = rank_size()
    # broadcast (and a bool tensor, moved as bytes)
    t = torch.arange(5, dtype=torch.float32) if r == s - 1 else torch.zeros(5)
    dist.broadcast(t, src=s - 1)
    assert torch.equal(t, torch.arange(5, dtype=torch.float32))
    b = torch.tensor([True, False, r == 0])
    dist.broadcast(b, src=0)
    assert b.tolist() == [True, False, True]
    # reduce
    t = torch.full((3,), float(r + 1))
    dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    if r == 0:
        assert torch.all(t == s * (s + 1) / 2)
    # all_gather, all_gather_into_tensor
    outs = [torch.zeros(2, 2, dtype=torch.int64) for _ in range(s)]
    dist.all_gather(outs, torch.full((2, 2), r, dtype=torch.int64))
    assert [o[0, 0].item() for o in outs] == list(range(s))
    flat = torch.zeros(s * 3, dtype=torch.float64)
    dist.all_gather_into_tensor(flat, torch.full((3,), float(r), dtype=torch.float64))
    assert flat.tolist() == [float(q) for q in range(s) for _ in range(3)]
    # reduce_scatter, reduce_scatter_tensor
    out = torch.zeros(2)
    dist.reduce_scatter(out, [torch.full((2,), float(r + q)) for q in range(s)])
    assert torch.all(out == sum(q + r for q in range(s)))
    inp = torch.arange(s * 2, dtype=torch.float32) + r
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.MAX)
    assert out.tolist() == [2 * r + s - 1.0, 2 * r + s]
    # all_to_all with per-peer sizes
    ins = [torch.full((q + 1,), float(10 * r + q)) for q in range(s)]
    outs = [torch.zeros(r + 1) for _ in range(s)]
    dist.all_to_all(outs, ins)
    assert [o.tolist() for o in outs] == [[float(10 * q + r)] * (r + 1) for q in range(s)]
    # all_to_all_single: equal and with split sizes
    inp = torch.arange(s * 2, dtype=torch.int32) + 100 * r
    out = torch.zeros(s * 2, dtype=torch.int32)
    dist.all_to_all_single(out, inp)
    assert out.tolist() == [100 * q + 2 * r + k for q in range(s) for k in range(2)]
    in_splits = [q + 1 for q in range(s)]           # rank r sends q+1 rows to rank q
    out_splits = [r + 1] * s                        # and gets r+1 rows from everyone
    inp = torch.cat([torch.full((q + 1, 2), float(10 * r + q)) for q in range(s)])
    out = torch.zeros(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    assert out[:, 0].tolist() == [float(10 * q + r) for q in range(s) for _ in range(r + 1)]
    # gather / scatter
    root = s - 1
    gl = [torch.zeros(2) for _ in range(s)] if r == root else None
    dist.gather(torch.full((2,), float(r)), gl, dst=root)
    if r == root:
        assert [g[0].item() for g in gl] == [float(q) for q in range(s)]
    out = torch.zeros(3)
    dist.scatter(out, [torch.full((3,), float(q * q)) for q in range(s)] if r == 0 else None, src=0)
    assert torch.all(out == float(r * r))
    # object collectives (pickles in uint8 tensors) and an empty tensor
    objs = [None] * s
    dist.all_gather_object(objs, {"rank": r})
    assert objs == [{"rank": q} for q in range(s)]
    lst = [("from", r), None]
    dist.broadcast_object_list(lst, src=s - 1)
    assert lst == [("from", s - 1), None]
    e = torch.zeros(0)
    dist.all_reduce(e)
    dist.barrier()


def test_point_to_point():
    r, s = rank_size()
    if s < 2:
        pytest.skip("needs 2 ranks")
    if r == 0:
        dist.send(torch.arange(4, dtype=torch.float32), dst=1)
        w = dist.isend(torch.arange(3, dtype=torch.int64), dst=1)
        w.wait()
    elif r == 1:
        t = torch.zeros(4)
        dist.recv(t, src=0)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
        u = torch.zeros(3, dtype=torch.int64)
        dist.irecv(u, src=0).wait()
        assert u.tolist() == [0, 1, 2]
    with pytest.raises(weft.Unsupported, match="any source"):
        dist.recv(torch.zeros(1))
    dist.barrier()


def test_async_work_and_future():
    r, s = rank_size()
    t = torch.ones(4, dtype=torch.float64) * (r + 1)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    assert torch.all(fut.wait() == s * (s + 1))
    assert work.is_completed() and work.is_success()
    works = [dist.all_reduce(torch.ones(3) * q, async_op=True) for q in range(5)]
    for w in works:
        w.wait()
    # non-contiguous tensors work (through a contiguous copy)
    m = torch.zeros(3, 4)
    m[:, 1] = r + 1
    dist.all_reduce(m[:, 1])
    assert torch.all(m[:, 1] == s * (s + 1) / 2) and m[:, 0].sum() == 0


def test_subgroup_uses_unique_id_exchange():
    r, s = rank_size()
    if s < 2:
        pytest.skip("needs 2 ranks")
    evens = [q for q in range(s) if q % 2 == 0]
    g = dist.new_group(evens, backend="weft")
    if r in evens:
        t = torch.tensor([float(r)])
        dist.all_reduce(t, group=g)
        assert t.item() == sum(evens)
        assert g.comm.size == len(evens)
    dist.barrier()


def test_errors_reach_the_future():
    g = dist.new_group(backend="weft")  # every rank: its own communicator
    g.abort()
    with pytest.raises(weft.Aborted):
        dist.all_reduce(torch.ones(2), group=g)
    work = dist.all_reduce(torch.ones(2), group=g, async_op=True)
    with pytest.raises(weft.Aborted):
        work.wait()
    assert work.is_completed() and not work.is_success()
    g.shutdown()
    dist.barrier()


# ------------------------------------------------------------------ DDP parity

STEPS, PER_RANK = 20, 8


def make_model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).double()


def make_batch(n):
    g = torch.Generator().manual_seed(4321)
    return (torch.randn(n, 8, generator=g, dtype=torch.float64),
            torch.randn(n, 4, generator=g, dtype=torch.float64))


def train(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()


@pytest.mark.parametrize("backend", ["weft", "gloo"])
def test_ddp_matches_single_process(backend):
    r, s = rank_size()
    pg = dist.group.WORLD if backend == "weft" else dist.new_group(backend="gloo")
    x, y = make_batch(PER_RANK * s)

    reference = make_model()
    initial = [p.detach().clone() for p in reference.parameters()]
    train(reference, x, y)  # one process, the whole batch

    model = make_model()
    ddp = DDP(model, process_group=pg)
    shard = slice(r * PER_RANK, (r + 1) * PER_RANK)
    train(ddp, x[shard], y[shard])  # each rank its shard; DDP averages the gradients

    worst = 0.0
    for p, q, p0 in zip(model.parameters(), reference.parameters(), initial):
        assert (q - p0).abs().max() > 1e-3  # training moved the parameters
        rel = ((p.detach() - q).abs() / q.abs().clamp_min(1e-12)).max().item()
        worst = max(worst, rel)
        assert torch.allclose(p.detach(), q, rtol=1e-6, atol=1e-12), (backend, rel)
    print("DDP over %s, %d ranks, %d steps: largest relative difference to one process %.3g"
          % (backend, s, STEPS, worst))
    # every rank ends with the same parameters
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.zeros_like(flat) for _ in range(s)]
    dist.all_gather(everyone, flat)
    for e in everyone:
        assert torch.equal(e, flat)
    np.testing.assert_array_less(worst, 1e-6)


# ------------------------------------------------------------------ exit and profiling (one process)

_EXIT_CHILD = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
import torch.distributed as dist
import weft.torch as wt

dist.init_process_group("weft", store=dist.HashStore(), rank=0, world_size=1)
pg = dist.group.WORLD
t = torch.ones(4)
dist.all_reduce(t)
prof = pg.profile()
assert set(prof) == {"allreduce"} and prof["allreduce"].count == 1 and prof["allreduce"].bytes == 16, prof
assert prof["allreduce"].ran >= 0 and prof["allreduce"].queued >= 0, prof


def late():
    # Still running when the main thread reaches the end of the script; ends in torch's C++ code.
    time.sleep(0.5)
    torch.ones(1 << 20).add_(1)
    print("late job done", flush=True)
    return []


pg._submit(late, "late")
dist.destroy_process_group()  # drops the group: only its worker knows about the queued job now
del pg
print("main done", flush=True)
'''


_LAUNCHER_ENV = {"WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE", "WEFT_MASTER_ADDR",
                 "WEFT_MASTER_PORT", "WEFT_JOB_SECRET", "WEFT_STORE_HOSTED", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                 "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}


def test_exit_waits_for_workers_of_destroyed_groups(tmp_path):
    """A worker still running when the interpreter finalizes is killed inside torch's C++ code
    ("terminate called without an active exception", SIGABRT): the exit handler must join the
    workers of every group, including groups already destroyed. Also WEFT_TORCH_PROFILE=1."""
    script = tmp_path / "child.py"
    script.write_text(_EXIT_CHILD)
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}  # a job of its own (unique-id path)
    env["WEFT_TORCH_PROFILE"] = "1"
    package_root = str(pathlib.Path(wt.__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, str(script), package_root], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert "terminate called" not in done.stderr, done.stderr
    assert done.stdout.split() == ["main", "done", "late", "job", "done"], (done.stdout, done.stderr)
