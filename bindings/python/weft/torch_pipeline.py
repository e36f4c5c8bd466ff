"""torch stage modules under any weft pipeline schedule (weft/pipeline.h's executor).

    import torch, weft
    from weft.torch_pipeline import PipelineRunner
    schedule = weft.Schedule.generate("zbv", ranks=comm.size, microbatches=8)
    mine = {s: stage_module[s] for s in schedule.stages_of(comm.rank)}
    runner = PipelineRunner(comm, schedule, mine, torch.nn.functional.mse_loss,
                            boundaries=((4, 16), torch.float32))     # one microbatch's activation
    for step ...:
        opt.zero_grad()
        loss = runner.step(inputs, targets)   # the batch's mean loss on the last stage's rank, else None
        opt.step()

How the callbacks map onto autograd:
  F(s, i): runs stage s on its input (the microbatch of `inputs` on stage 0, else a copy of the
    received activation as a leaf that requires grad) and writes the output into weft's buffer.
    The last stage computes loss_fn(output, target_i) / m, so that the losses add up to the mean
    over the whole batch (equal microbatches, a mean-reducing loss). The graph is kept per
    (stage, microbatch) until its backward.
  B(s, i): torch.autograd.backward from the loss (last stage) or the received output gradient;
    writes the input's gradient into weft's buffer; parameter gradients accumulate in .grad.
  I(s, i): torch.autograd.grad w.r.t. the stage's input only (retain_graph=True): autograd
    prunes what the input gradient does not need, so no weight gradient is computed here.
  W(s, i): torch.autograd.grad w.r.t. the stage's parameters from the same graph and output
    gradient, added to .grad; the graph is freed. I then W gives B's gradients exactly.
  REDUCE_GRAD(s): the optional reduce_grad(stage, module) hook (e.g. a data-parallel all-reduce).
"""

import numpy as np
import torch

from ._buffers import as_dtype
from ._errors import InvalidArgument, Unsupported
from ._pipeline import Pipeline, Schedule

_TORCH_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
                 torch.bfloat16: "bfloat16"}
_BY_NAME = {name: dt for dt, name in _TORCH_DTYPES.items()}


def _torch_dtype(dtype, i):
    """A torch dtype from a torch dtype or anything weft.as_dtype takes ("float32", np.float32)."""
    if isinstance(dtype, torch.dtype):
        found = dtype if dtype in _TORCH_DTYPES else None
    else:
        found = _BY_NAME.get(as_dtype(dtype).name.lower())
    if found is None:
        raise Unsupported("boundaries[%d]: dtype %s; the torch runner moves %s" % (
            i, dtype, ", ".join(str(d) for d in _TORCH_DTYPES)))
    return found


def _torch_view(arr, dtype):
    """A torch tensor over the numpy view of a weft buffer (bfloat16 arrives as uint16 storage)."""
    if dtype == torch.bfloat16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


class PipelineRunner:
    """Runs the stage modules this rank holds under `schedule` over `comm` (see the module's
    docstring). stages: {stage: torch.nn.Module} for exactly the stages schedule.stages_of(rank)
    names. loss_fn(output, target) -> scalar (mean over the microbatch). boundaries: the shape
    and torch dtype of one microbatch's activation between stages, ((4, 16), torch.float32) for
    every boundary or a list of S - 1 of them. reduce_grad: optional hook (stage, module) called
    at REDUCE_GRAD actions. record=True: each step's measured Timeline is kept in .timeline."""

    def __init__(self, comm, schedule, stages, loss_fn, boundaries, reduce_grad=None, record=False):
        if not isinstance(schedule, Schedule):
            raise InvalidArgument("PipelineRunner(schedule=...): expected a weft.Schedule, got %r" % (schedule,))
        self.schedule = schedule
        self.rank = comm.rank
        self.nstages = schedule.stages
        self.microbatches = schedule.microbatches
        self.modules = {int(s): m for s, m in dict(stages).items()}
        held = schedule.stages_of(comm.rank)
        if sorted(self.modules) != held:
            raise InvalidArgument("PipelineRunner: rank %d holds stages %s in this schedule; modules were given for %s"
                                  % (comm.rank, held, sorted(self.modules)))
        nb = self.nstages - 1
        specs = [boundaries] * nb if (isinstance(boundaries, tuple) and len(boundaries) == 2
                                      and not isinstance(boundaries[1], tuple)) else list(boundaries)
        if len(specs) != nb:
            raise InvalidArgument("PipelineRunner: %d boundaries given; the schedule has %d stages, so %d"
                                  % (len(specs), self.nstages, nb))
        self._dtypes = []
        c_specs = []
        for i, (shape, dtype) in enumerate(specs):
            dtype = _torch_dtype(dtype, i)
            self._dtypes.append(dtype)
            c_specs.append((tuple(shape), _TORCH_DTYPES[dtype]))
        self.loss_fn = loss_fn
        self._reduce_hook = reduce_grad
        self._state = {}  # (stage, microbatch) -> [input leaf, output or loss, output gradient]
        self._inputs = self._targets = None
        self._losses = []
        self.timeline = None
        self.pipeline = Pipeline(comm, schedule, forward=self._forward, backward=self._backward,
                                 backward_input=self._backward_input, backward_weight=self._backward_weight,
                                 reduce_grad=self._reduce_grad if reduce_grad is not None else None,
                                 boundaries=c_specs, record=record)

    # -------------------------------------------------------------- the callbacks

    def _forward(self, kind, stage, mb, inp, out):
        with torch.enable_grad():
            if stage == 0:
                x = self._inputs[mb]
            else:
                # A copy: W may still need the input after I returned (when weft reuses the buffer).
                x = _torch_view(inp, self._dtypes[stage - 1]).clone().requires_grad_(True)
            y = self.modules[stage](x)
            if stage == self.nstages - 1:
                loss = self.loss_fn(y, self._targets[mb]) / self.microbatches
                self._losses.append(float(loss.detach()))
                self._state[(stage, mb)] = [x, loss, None]
            else:
                _torch_view(out, self._dtypes[stage]).copy_(y.detach())
                self._state[(stage, mb)] = [x, y, None]

    def _output_grad(self, stage, inp):
        if stage == self.nstages - 1:
            return None  # the loss: autograd starts from 1
        return _torch_view(inp, self._dtypes[stage]).clone()

    def _write_input_grad(self, stage, x, grad, out):
        if out is None:
            return
        view = _torch_view(out, self._dtypes[stage - 1])
        if grad is None:  # a stage whose output does not depend on its input
            view.zero_()
        else:
            view.copy_(grad)

    def _backward(self, kind, stage, mb, inp, out):
        x, y, _ = self._state.pop((stage, mb))
        with torch.enable_grad():
            g = self._output_grad(stage, inp)
            torch.autograd.backward(y, grad_tensors=g)
        self._write_input_grad(stage, x, x.grad if stage > 0 else None, out)

    def _backward_input(self, kind, stage, mb, inp, out):
        st = self._state[(stage, mb)]
        x, y, _ = st
        with torch.enable_grad():
            g = self._output_grad(stage, inp)
            if stage > 0:
                (gx,) = torch.autograd.grad(y, x, grad_outputs=g, retain_graph=True, allow_unused=True)
                self._write_input_grad(stage, x, gx, out)
        st[2] = g  # W differentiates the same graph with the same output gradient

    def _backward_weight(self, kind, stage, mb, inp, out):
        x, y, g = self._state.pop((stage, mb))
        params = [p for p in self.modules[stage].parameters() if p.requires_grad]
        if not params:
            return
        with torch.enable_grad():
            grads = torch.autograd.grad(y, params, grad_outputs=g, allow_unused=True)
        for p, gp in zip(params, grads):
            if gp is None:
                continue
            if p.grad is None:
                p.grad = gp
            else:
                p.grad.add_(gp)

    def _reduce_grad(self, kind, stage, mb, inp, out):
        self._reduce_hook(stage, self.modules[stage])

    # -------------------------------------------------------------- a step

    def _split(self, batch, what):
        if batch is None:
            return None
        if isinstance(batch, (list, tuple)):
            if len(batch) != self.microbatches:
                raise InvalidArgument("PipelineRunner.step: %d %s microbatches; the schedule has %d"
                                      % (len(batch), what, self.microbatches))
            return list(batch)
        return list(torch.tensor_split(batch, self.microbatches))

    def step(self, inputs=None, targets=None):
        """Forward and backward of one batch under the schedule: gradients accumulate in the
        held modules' .grad (zero them and step the optimizer yourself). inputs: the batch (a
        tensor split in m along dim 0, or a list of m microbatches), needed on the rank that
        holds stage 0; targets likewise on the rank that holds the last stage. Returns the
        batch's mean loss there (the sum of the scaled microbatch losses), None elsewhere."""
        first, last = 0 in self.modules, (self.nstages - 1) in self.modules
        if first and inputs is None:
            raise InvalidArgument("PipelineRunner.step: rank %d holds stage 0 and needs inputs" % self.rank)
        if last and targets is None:
            raise InvalidArgument("PipelineRunner.step: rank %d holds the last stage (%d) and needs targets"
                                  % (self.rank, self.nstages - 1))
        self._inputs = self._split(inputs, "input") if first else None
        self._targets = self._split(targets, "target") if last else None
        self._losses = []
        self._state.clear()
        try:
            self.timeline = self.pipeline.run()
        finally:
            self._state.clear()
            self._inputs = self._targets = None
        return sum(self._losses) if last else None

    def close(self):
        self.pipeline.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["PipelineRunner"]
