"""weft.Zero (training.h's ZeRO stages 0-3) across the ranks of a weftrun job: a tiny numpy MLP
trained data-parallel (each rank on its rows of every batch) must end where single-process
training with optimizers written here in numpy (torch.optim's formulas, foreach=False) ends,
within 1e-5 relative per parameter; the reported gradient norm equals numpy's; save/load round
trips; bf16 parameters come back as uint16 arrays or torch.bfloat16 tensors; a non-finite
gradient on one rank skips the step everywhere; bad input names the parameter.
WEFT_TEST_INJECT=1 corrupts one parameter before each parity comparison (it must be caught)."""

import os
import shutil
import tempfile

import numpy as np
import pytest
import torch

import weft
from weft import _lib
from _helpers import assert_parity, bf16_decode, bf16_round

TOL = 1e-5
BATCH, D_IN, D_HID, D_OUT = 12, 5, 7, 3  # 12 rows split over 1, 2, 3 or 4 ranks
NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
GROUPS = [0, 0, 1, 1]  # 42 and 24 elements: uneven over 4 ranks


@pytest.fixture(autouse=True)
def _needs_zero():
    if not _lib.has("weft_zero_create"):
        pytest.skip("the loaded libweft lacks the training.h functions")


@pytest.fixture(scope="module")
def line(world):
    m = weft.Mesh(world, (world.size,), ("dp",))
    yield m
    m.close()


# ------------------------------------------------------------------ the model, in numpy

def init_params(seed=3):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((D_HID, D_IN)) * 0.5).astype(np.float32),
            (rng.standard_normal(D_HID) * 0.1).astype(np.float32),
            (rng.standard_normal((D_OUT, D_HID)) * 0.5).astype(np.float32),
            (rng.standard_normal(D_OUT) * 0.1).astype(np.float32)]


def batch(step):
    rng = np.random.default_rng(100 + step)
    return rng.standard_normal((BATCH, D_IN)).astype(np.float32), rng.standard_normal((BATCH, D_OUT)).astype(np.float32)


def forward_backward(p, x, y):
    """Gradients of the MSE loss mean((tanh(x W1^T + b1) W2^T + b2 - y)^2) over x's rows."""
    w1, b1, w2, b2 = p
    h = np.tanh(x @ w1.T + b1)
    out = h @ w2.T + b2
    dout = 2.0 * (out - y) / out.size
    dw2, db2 = dout.T @ h, dout.sum(0)
    dh = (dout @ w2) * (1 - h * h)
    return [(dh.T @ x).astype(np.float32), dh.sum(0).astype(np.float32), dw2.astype(np.float32),
            db2.astype(np.float32)]


class RefOptimizer:
    """torch.optim's single-tensor arithmetic in float32 numpy (written from its documentation)."""

    def __init__(self, kind, lr, momentum=0.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.kind, self.lr, self.momentum, self.betas, self.eps, self.wd = kind, lr, momentum, betas, eps, weight_decay
        self.t, self.state = 0, None

    def step(self, params, grads):
        f = np.float32
        self.t += 1
        if self.state is None:
            self.state = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
        for p, g, st in zip(params, grads, self.state):
            g = g.astype(np.float32)
            if self.kind == "sgd":
                if self.wd:
                    g = g + f(self.wd) * p
                if self.momentum:
                    st[0] = g.copy() if self.t == 1 else f(self.momentum) * st[0] + g
                    g = st[0]
                p -= f(self.lr) * g
                continue
            b1, b2 = self.betas
            if self.kind == "adamw":
                p *= f(1 - self.lr * self.wd)
            elif self.wd:
                g = g + f(self.wd) * p
            st[0] += f(1 - b1) * (g - st[0])
            st[1] = f(b2) * st[1] + f(1 - b2) * g * g
            bc1, bc2 = 1 - b1 ** self.t, 1 - b2 ** self.t
            denom = np.sqrt(st[1]) / f(np.sqrt(bc2)) + f(self.eps)
            p -= f(self.lr / bc1) * st[0] / denom


def reference(optimizer, steps, clip=0.0):
    """Single-process training on whole batches; returns (params, gradient norms per step)."""
    p = init_params()
    norms = []
    for step in range(steps):
        x, y = batch(step)
        g = forward_backward(p, x, y)
        norm = float(np.sqrt(sum(np.sum(gi.astype(np.float64) ** 2) for gi in g)))
        norms.append(norm)
        if clip and norm > clip:
            g = [gi * np.float32(clip / (norm + 1e-6)) for gi in g]
        optimizer.step(p, g)
    return p, norms


# ------------------------------------------------------------------ training with weft.Zero

def read_params(zero):
    """float32 copies of the full parameters (gathered at stage 3)."""
    req = None
    for g in range(zero.num_groups):
        r = zero.gather(g, async_op=True)  # prefetch every group, then wait
        req = req or r
        if r is not None:
            r.wait()
    out = [np.array(zero.param(i), dtype=np.float32) for i in range(zero.num_params)]
    for g in range(zero.num_groups):
        zero.release(g)
    return out


def train(zero, first, last, dp_rank, dp_size, corrupt=None):
    rows = BATCH // dp_size
    infos = []
    for step in range(first, last):
        x, y = batch(step)
        p = read_params(zero)
        g = forward_backward(p, x[dp_rank * rows:(dp_rank + 1) * rows], y[dp_rank * rows:(dp_rank + 1) * rows])
        if corrupt is not None:
            corrupt(step, g)
        for i in reversed(range(len(g))):  # backward's order: last layer first
            zero.grad_ready(i, g[i])
        infos.append(zero.step())
    return infos


OPTIMIZERS = {
    "adamw": (lambda: weft.AdamW(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1),
              lambda: RefOptimizer("adamw", 0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)),
    "adam": (lambda: weft.Adam(lr=0.01, weight_decay=0.05), lambda: RefOptimizer("adam", 0.01, weight_decay=0.05)),
    "sgd": (lambda: weft.SGD(lr=0.1, momentum=0.9, weight_decay=0.01),
            lambda: RefOptimizer("sgd", 0.1, momentum=0.9, weight_decay=0.01)),
}


@pytest.mark.parametrize("stage,opt,clip", [(0, "adamw", 0.0), (1, "adamw", 0.0), (2, "adamw", 0.0),
                                            (3, "adamw", 0.0), (2, "sgd", 0.0), (1, "adam", 0.0),
                                            (3, "adamw", 0.5)])
def test_training_equals_one_process(world, line, stage, opt, clip):
    steps = 6
    make, make_ref = OPTIMIZERS[opt]
    with weft.Zero(line, "dp", dict(zip(NAMES, init_params())), stage=stage, optimizer=make(), groups=GROUPS,
                   max_grad_norm=clip) as zero:
        assert zero.num_groups == 2 and [zero.group_of(n) for n in NAMES] == GROUPS
        infos = train(zero, 0, steps, world.rank, world.size)
        got = read_params(zero)
        mem = zero.memory()
    want, norms = reference(make_ref(), steps, clip)
    if clip:
        assert max(norms) > clip  # clipping did happen
    for name, g, w in zip(NAMES, got, want):
        assert_parity("zero stage %d %s%s %s" % (stage, opt, " clip" if clip else "", name), g, w, TOL)
    for info, norm in zip(infos, norms):
        assert not info.skipped and info.loss_scale == 1.0
        assert abs(info.grad_norm - norm) <= 1e-5 * norm
        assert info.comm_elements > 0 and info.comm_bytes == 4 * info.comm_elements  # float32 on the wire
    total = 4 * sum(p.size for p in init_params())
    if stage == 3 and world.size > 1:
        assert mem.params < total  # parameters are sharded
    elif stage < 3:
        assert mem.params >= total


def test_save_load_round_trip(world, line):
    make, make_ref = OPTIMIZERS["adamw"]
    path = None
    if world.rank == 0:
        path = tempfile.mkdtemp(prefix="weft-zero-")
    buf = np.zeros(256, np.uint8)
    if world.rank == 0:
        raw = path.encode()
        buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    world.broadcast(buf)
    path = bytes(buf).rstrip(b"\0").decode()
    ckpt = os.path.join(path, "state")
    try:
        with weft.Zero(line, "dp", init_params(), stage=2, optimizer=make(), groups=GROUPS, names=NAMES) as a:
            train(a, 0, 3, world.rank, world.size)
            a.save(ckpt)
            saved = read_params(a)
            train(a, 3, 6, world.rank, world.size)
            after_a = read_params(a)
        zeros = [np.zeros_like(p) for p in init_params()]
        with weft.Zero(line, "dp", zeros, stage=3, optimizer=make(), groups=GROUPS, names=NAMES) as b:
            b.load(ckpt)
            for name, got, want in zip(NAMES, read_params(b), saved):
                np.testing.assert_array_equal(got, want, err_msg=name)
            train(b, 3, 6, world.rank, world.size)
            after_b = read_params(b)
        want, _ = reference(make_ref(), 6)
        for name, got_a, got_b, w in zip(NAMES, after_a, after_b, want):
            np.testing.assert_array_equal(got_b, got_a, err_msg=name)  # stages 2 and 3 reduce alike
            assert_parity("zero save/load %s" % name, got_b, w, TOL)
        with weft.Zero(line, "dp", [np.zeros((2, 2), np.float32)], stage=1, optimizer=make(), names=["other"]) as c:
            with pytest.raises(weft.WeftError, match="fc1.weight|other|shape|param"):
                c.load(ckpt)
    finally:
        world.barrier()
        if world.rank == 0:
            shutil.rmtree(path, ignore_errors=True)


def test_bf16_parameters(world, line):
    init = init_params()
    with weft.Zero(line, "dp", init, stage=2, param_dtype="bfloat16", optimizer=weft.SGD(lr=0.0)) as z:
        assert z.param_dtype == weft.BFLOAT16
        for i, p in enumerate(init):
            a = z.param(i)
            assert a.dtype == np.uint16 and a.shape == p.shape and not a.flags.writeable
            np.testing.assert_array_equal(a, bf16_round(p))  # float32 initial values rounded once
            t = z.param(i, like="torch")
            assert t.dtype == torch.bfloat16 and tuple(t.shape) == p.shape
            np.testing.assert_array_equal(t.float().numpy(), bf16_decode(bf16_round(p)).astype(np.float32))
        g = [bf16_round(np.full(p.shape, 0.5, np.float32)) for p in init]  # uint16 storage read as bfloat16
        for i in reversed(range(len(g))):
            z.grad_ready(i, g[i] if i % 2 else torch.from_numpy(g[i].astype(np.int16)).view(torch.bfloat16))
        info = z.step()
        assert not info.skipped
        with pytest.raises(weft.InvalidArgument, match="bfloat16"):
            z.grad_ready(0, init[0])  # float32 where the parameters are bfloat16


def test_non_finite_gradient_skips_everywhere(world, line):
    def corrupt(step, g):
        if step == 1 and world.rank == world.size - 1:
            g[2][0, 0] = np.inf

    with weft.Zero(line, "dp", init_params(), stage=2, optimizer=weft.SGD(lr=0.1), loss_scale=8.0,
                   dynamic_loss_scale=True) as z:
        before = None
        infos = []
        for step in range(3):
            if step == 1:
                before = read_params(z)
            infos += train(z, step, step + 1, world.rank, world.size, corrupt)
            if step == 1:
                for got, want in zip(read_params(z), before):
                    np.testing.assert_array_equal(got, want)
        assert [i.skipped for i in infos] == [False, True, False]
        assert [i.loss_scale for i in infos] == [8.0, 4.0, 4.0]


def test_bad_input_names_the_parameter(world, line):
    with weft.Zero(line, "dp", dict(zip(NAMES, init_params())), stage=3, optimizer=weft.SGD(lr=0.1),
                   groups=GROUPS) as z:
        with pytest.raises(weft.InvalidArgument):
            z.param("fc2.bias")  # stage 3: not gathered
        z.gather(1)
        assert z.param("fc2.bias").shape == (D_OUT,)
        assert z.gather(1, async_op=True) is None  # already gathered
        z.release(1)
        g = forward_backward(init_params(), *batch(0))
        z.grad_ready(3, g[3])
        with pytest.raises(weft.InvalidArgument, match="fc2.bias"):
            z.grad_ready("fc2.bias", g[3])  # twice in a step
        with pytest.raises(weft.InvalidArgument, match="fc2.weight|shape"):
            z.grad_ready(2, g[3])  # the wrong shape
        for i in (2, 1):
            z.grad_ready(i, g[i])
        with pytest.raises(weft.InvalidArgument, match="fc1.weight"):
            z.step()  # never given (on every rank alike)
        with pytest.raises(weft.InvalidArgument, match="nope"):
            z.param("nope")
    with pytest.raises(weft.InvalidArgument, match="optimizer"):
        weft.Zero(line, "dp", init_params(), optimizer="adam")
    with pytest.raises(weft.InvalidArgument, match="stage"):
        weft.Zero(line, "dp", init_params(), stage=4)
    with pytest.raises(weft.InvalidArgument, match="nodim"):
        weft.Zero(line, "nodim", init_params())

