"""The pipeline executor through the binding (weft.Pipeline, weft.torch_pipeline) across the ranks
of a weftrun job (4 ranks), for every generator:

  (a) numpy callbacks on a tiny model (stage s: y = tanh(x W_s), loss 0.5 |y - t|^2 / m) run
      twice under the schedule; the weight gradients of the stages a rank holds, the loss on the
      last stage's rank, and the REDUCE_GRAD calls (once per held stage, after its m backward
      pieces) equal one process running the same functions over the micro-batches in order;
  (b) a float32 MLP of 8 Linear + tanh layers split into S stages (4, or 8 for the v = 2
      methods), trained 10 steps with SGD through weft.torch_pipeline.PipelineRunner, equals
      single-process torch training on the whole batch to 1e-5 relative (max |diff| / max |ref|)
      on every parameter a rank holds and on the loss of every step;
  (c) a callback's exception stops the run, and its text (and the exception as __cause__)
      appears in the error on that rank; the other ranks get an error, not a hang.

WEFT_TEST_INJECT=1 corrupts one element before each parity comparison, which must then fail.
"""

import copy

import numpy as np
import pytest
import torch

import weft
from weft import _lib
from weft import ActionKind as K, ScheduleKind
from weft.torch_pipeline import PipelineRunner

from _helpers import assert_parity

# A library built before pipeline.h (test_local.py's test_every_function_declared fails for it).
pytestmark = pytest.mark.skipif(not _lib.has("weft_pipeline_run"), reason="the loaded libweft lacks pipeline.h")

H, BATCH = 16, 32  # width, samples per step
V2 = (ScheduleKind.INTERLEAVED_1F1B, ScheduleKind.ZB_V, ScheduleKind.DUALPIPE_V)


def _schedule(world, kind, reduce_grad=False):
    p = world.size
    v = 2 if kind in V2 else 1
    return weft.Schedule.generate(kind, p, 2 * p, stages_per_rank=v if kind == ScheduleKind.INTERLEAVED_1F1B else 0,
                                  reduce_grad=reduce_grad)


# ------------------------------------------------------------------ (a) numpy callbacks

class NumpyStages:
    """Stage s: y = tanh(x W_s) in float64 on float32 boundaries; the last stage's loss is
    0.5 |y - t_i|^2 / m. Gradients of W_s accumulate in float64."""

    def __init__(self, weights, xs, ts, stages):
        self.w, self.xs, self.ts, self.stages = weights, xs, ts, stages
        self.m = len(xs)
        self.grads = {s: np.zeros_like(weights[s]) for s in stages}
        self.keep = {}  # (stage, mb) -> [x, y, dz]
        self.loss = 0.0
        self.backward_pieces = {s: 0 for s in stages}
        self.reduced = []  # (stage, backward pieces done by then)

    def forward(self, kind, s, i, inp, out):
        x = self.xs[i] if s == 0 else np.array(inp, dtype=np.float64)
        y = np.tanh(x @ self.w[s])
        self.keep[(s, i)] = [x, y, None]
        if out is None:
            self.loss += 0.5 * float(np.sum((y - self.ts[i]) ** 2)) / self.m
        else:
            out[...] = y

    def _dz(self, s, i, inp):
        x, y, _ = self.keep[(s, i)]
        dy = (y - self.ts[i]) / self.m if inp is None else np.asarray(inp, dtype=np.float64)
        return dy * (1.0 - y * y)

    def backward(self, kind, s, i, inp, out):
        self.backward_input(kind, s, i, inp, out)
        self.backward_weight(kind, s, i, None, None)

    def backward_input(self, kind, s, i, inp, out):
        dz = self._dz(s, i, inp)
        self.keep[(s, i)][2] = dz
        if out is not None:
            out[...] = dz @ self.w[s].T

    def backward_weight(self, kind, s, i, inp, out):
        x, _, dz = self.keep.pop((s, i))
        self.grads[s] += x.T @ dz
        self.backward_pieces[s] += 1

    def reduce_grad(self, kind, s, i, inp, out):
        assert i == -1 and inp is None and out is None
        self.reduced.append((s, self.backward_pieces[s]))

    def reference(self, nstages):
        """One process: every micro-batch through every stage in order, boundaries in float32."""
        for i in range(self.m):
            outs = []
            for s in range(nstages):
                inp = None if s == 0 else outs[-1]
                buf = np.zeros((len(self.xs[i]), self.w[s].shape[1]), np.float32) if s < nstages - 1 else None
                self.forward(K.F, s, i, inp, buf)
                outs.append(buf)
            grad = None
            for s in reversed(range(nstages)):
                buf = np.zeros((len(self.xs[i]), self.w[s].shape[0]), np.float32) if s > 0 else None
                self.backward(K.B, s, i, grad, buf)
                grad = buf


@pytest.mark.parametrize("kind", weft.GENERATORS, ids=lambda k: k.name.lower())
def test_numpy_pipeline_equals_one_process(world, kind):
    with _schedule(world, kind, reduce_grad=True) as sched:
        S, m = sched.stages, sched.microbatches
        mine = sched.stages_of(world.rank)
        rng = np.random.default_rng(7)
        weights = [rng.standard_normal((H, H)) * (0.8 / np.sqrt(H)) for _ in range(S)]
        mb = BATCH // m
        xs = [rng.standard_normal((mb, H)).astype(np.float32).astype(np.float64) for _ in range(m)]
        ts = [rng.standard_normal((mb, H)) * 0.5 for _ in range(m)]
        ref = NumpyStages(weights, xs, ts, list(range(S)))
        ref.reference(S)

        model = NumpyStages(weights, xs, ts, mine)
        pipe = weft.Pipeline(world, sched, forward=model.forward, backward=model.backward,
                             backward_input=model.backward_input, backward_weight=model.backward_weight,
                             reduce_grad=model.reduce_grad, boundaries=[((mb, H), "float32")] * (S - 1), record=True)
        with pipe:
            for run in range(2):  # a second run reuses the executor's buffers
                model.grads = {s: np.zeros_like(weights[s]) for s in mine}
                model.loss, model.reduced = 0.0, []
                model.backward_pieces = {s: 0 for s in mine}
                timeline = pipe.run()
                assert not model.keep, "(stage, microbatch) left without a backward: %s" % sorted(model.keep)
                assert sorted(model.reduced) == [(s, m) for s in mine], model.reduced
                with timeline:
                    assert timeline.ranks == world.size and timeline.makespan > 0
                    starts, ends, _ = timeline.rank(world.rank)
                    assert len(starts) == len(sched.actions(world.rank)) and (ends >= starts).all()
            for s in mine:
                assert_parity("%s numpy dW[%d]" % (kind.name, s), model.grads[s], ref.grads[s], 1e-6)
            if S - 1 in mine:
                assert_parity("%s numpy loss" % kind.name, np.array([model.loss]), np.array([ref.loss]), 1e-6)


def test_pipeline_arguments_refused(world):
    with weft.Schedule.generate("1f1b", world.size, 4) as sched:
        with pytest.raises(weft.InvalidArgument):
            weft.Pipeline(world, sched, forward=None)
        with pytest.raises(weft.InvalidArgument):
            weft.Pipeline(world, sched, forward=lambda *a: None, backward=42)
        with pytest.raises(weft.InvalidArgument):
            weft.Pipeline(world, sched, forward=lambda *a: None, boundaries=["nonsense"])
        with pytest.raises(weft.InvalidArgument):
            weft.Pipeline("comm", sched, forward=lambda *a: None)


# ------------------------------------------------------------------ (b) torch stage modules


def _make_layers():
    torch.manual_seed(1234)
    return [torch.nn.Linear(H, H) for _ in range(8)]


def _stage_module(layers, s, nstages):
    per = len(layers) // nstages
    mods = []
    for layer in layers[s * per:(s + 1) * per]:
        mods += [copy.deepcopy(layer), torch.nn.Tanh()]
    return torch.nn.Sequential(*mods)


def _batches(steps):
    g = torch.Generator().manual_seed(99)
    return [(torch.randn(BATCH, H, generator=g), torch.randn(BATCH, H, generator=g) * 0.5) for _ in range(steps)]


STEPS, LR = 10, 0.1


@pytest.mark.parametrize("kind", weft.GENERATORS, ids=lambda k: k.name.lower())
def test_torch_runner_equals_one_process(world, kind):
    torch.set_num_threads(1)
    layers = _make_layers()
    data = _batches(STEPS)
    # One process: the whole model on the whole batch.
    ref_stages = _stage_module(layers, 0, 1)
    ref_opt = torch.optim.SGD(ref_stages.parameters(), lr=LR)
    ref_losses = []
    for x, t in data:
        ref_opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ref_stages(x), t)
        loss.backward()
        ref_opt.step()
        ref_losses.append(float(loss))

    with _schedule(world, kind) as sched:
        S, m = sched.stages, sched.microbatches
        mine = {s: _stage_module(layers, s, S) for s in sched.stages_of(world.rank)}
        params = [p for mod in mine.values() for p in mod.parameters()]
        opt = torch.optim.SGD(params, lr=LR)
        losses = []
        with PipelineRunner(world, sched, mine, torch.nn.functional.mse_loss,
                            boundaries=((BATCH // m, H), torch.float32)) as runner:
            for x, t in data:
                opt.zero_grad()
                losses.append(runner.step(x, t))
                opt.step()
        per = 8 // S
        ref_params = list(ref_stages.parameters())  # weight, bias per Linear, in layer order
        initial = [p for layer in layers for p in layer.parameters()]
        for s, mod in mine.items():
            got = list(mod.parameters())
            want = ref_params[2 * s * per:2 * (s + 1) * per]
            for k, (g, w) in enumerate(zip(got, want)):
                assert not torch.equal(g, initial[2 * s * per + k]), "stage %d param %d never moved" % (s, k)
                assert_parity("%s torch stage %d param %d" % (kind.name, s, k), g, w, 1e-5)
        if S - 1 in mine:
            assert_parity("%s torch losses" % kind.name, np.array(losses), np.array(ref_losses), 1e-5)
        else:
            assert losses == [None] * STEPS


# ------------------------------------------------------------------ (c) a failing callback


def test_failing_callback_reports_its_exception(world):
    # A short deadline: the ranks waiting for the failed rank's messages stop after 3 s.
    comm = world.split(0, world.rank, timeout=3.0)
    try:
        with weft.Schedule.generate("1f1b", comm.size, 4) as sched:
            last = sched.stages - 1

            def forward(kind, s, i, inp, out):
                if s == last and i == 1:
                    raise ValueError("stage %d exploded on microbatch %d" % (s, i))
                if out is not None:
                    out[...] = 1.0

            def backward(kind, s, i, inp, out):
                if out is not None:
                    out[...] = 0.0

            with weft.Pipeline(comm, sched, forward=forward, backward=backward,
                               boundaries=[((2, 3), "float32")] * last) as pipe:
                with pytest.raises(weft.WeftError) as err:
                    pipe.run()
            print("rank %d: %s" % (comm.rank, err.value))
            if sched.stage_rank(last) == comm.rank:
                text = str(err.value)
                assert "stage %d exploded on microbatch 1" % last in text, text
                assert "ValueError" in text, text
                assert isinstance(err.value.__cause__, ValueError)
    finally:
        comm.close()
    world.barrier()
