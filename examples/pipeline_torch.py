"""Pipeline parallelism in torch under any weft schedule.

A float32 MLP of 8 Linear + tanh layers is cut into S stages of contiguous layers (S = ranks, or
2 x ranks for the two-stages-per-rank methods: interleaved, zbv, dualpipev). Each rank builds
the stages weft's schedule places on it and weft.torch_pipeline.PipelineRunner runs them:
weft's executor calls the forward / backward (or input-backward and weight-backward) of each
(stage, micro-batch) in the schedule's order and moves activations and gradients between ranks.
SGD updates each rank's stages.

Per step the rank holding the last stage prints the batch's loss. The last step is recorded
(start and end of every action on every rank): the example prints its measured makespan and the
makespan weft's simulator predicts for the same schedule from the per-stage compute times that
were measured, so the schedule's own cost (its bubbles) can be told from the executor's.

Finally each rank checks its stages' parameters against the same model trained in this process
on whole batches (max |diff| / max |ref| <= 1e-5) and the job exits non-zero on a mismatch.

    build/bin/weftrun -n 4 /usr/bin/python3 examples/pipeline_torch.py [--schedule zbv]
        [--microbatches 8] [--steps 10] [--svg timeline.svg]
"""

import argparse
import copy
import os
import sys

try:
    import weft
except ImportError:  # running from a checkout: use bindings/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
    import weft

import numpy as np
import torch

from weft.torch_pipeline import PipelineRunner

LAYERS, WIDTH, BATCH, LR, TOL = 8, 64, 64, 0.5, 1e-5


def stage_module(layers, s, nstages):
    per = len(layers) // nstages
    mods = []
    for layer in layers[s * per:(s + 1) * per]:
        mods += [copy.deepcopy(layer), torch.nn.Tanh()]
    return torch.nn.Sequential(*mods)


def measured_costs(schedule, timeline):
    """Per stage, the mean measured time of F, and of B or of I and W, over every rank."""
    sums = {}
    for r in range(schedule.ranks):
        starts, ends, _ = timeline.rank(r)
        for a, t0, t1 in zip(schedule.actions(r), starts, ends):
            if a.kind in (weft.ActionKind.F, weft.ActionKind.B, weft.ActionKind.I, weft.ActionKind.W):
                n, total = sums.get((a.kind, a.stage), (0, 0.0))
                sums[(a.kind, a.stage)] = (n + 1, total + (t1 - t0))

    def mean(kind, s):
        n, total = sums.get((kind, s), (0, 0.0))
        return total / n if n else None

    S = schedule.stages
    costs = {"forward": [mean(weft.ActionKind.F, s) for s in range(S)]}
    if all(mean(weft.ActionKind.B, s) is not None for s in range(S)):
        costs["backward"] = [mean(weft.ActionKind.B, s) for s in range(S)]
    else:  # I/W methods (DualPipeV mixes B and I+W: a missing B is I + W)
        i = [mean(weft.ActionKind.I, s) for s in range(S)]
        w = [mean(weft.ActionKind.W, s) for s in range(S)]
        b = [mean(weft.ActionKind.B, s) for s in range(S)]
        costs["backward_input"] = [x if x is not None else bb / 2 for x, bb in zip(i, b)]
        costs["backward_weight"] = [x if x is not None else bb / 2 for x, bb in zip(w, b)]
    return costs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedule", default="1f1b", help="gpipe, 1f1b, interleaved, zbh1, zbh2, zbv, dualpipev")
    ap.add_argument("--microbatches", type=int, default=0, help="m (default: 2 x ranks)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--svg", default=None, help="write the last step's measured timeline here (rank 0)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    with weft.Comm.from_env(name="pipeline_torch") as comm:
        kind = weft.as_schedule_kind(args.schedule)
        m = args.microbatches or 2 * comm.size
        v = 2 if kind == weft.ScheduleKind.INTERLEAVED_1F1B else 0
        with weft.Schedule.generate(kind, comm.size, m, stages_per_rank=v) as schedule:
            S = schedule.stages
            if LAYERS % S or BATCH % m:
                raise SystemExit("pipeline_torch: %d layers over %d stages and a batch of %d in %d micro-batches "
                                 "must divide evenly" % (LAYERS, S, BATCH, m))
            torch.manual_seed(0)
            layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]
            # One batch, fitted step after step; targets from a fixed random "teacher" layer.
            g = torch.Generator().manual_seed(1)
            teacher = torch.randn(WIDTH, WIDTH, generator=g) / WIDTH ** 0.5
            x = torch.randn(BATCH, WIDTH, generator=g)
            data = [(x, 0.5 * torch.tanh(x @ teacher))] * args.steps

            mine = {s: stage_module(layers, s, S) for s in schedule.stages_of(comm.rank)}
            last = S - 1 in mine
            opt = torch.optim.SGD([p for mod in mine.values() for p in mod.parameters()], lr=LR)
            runner = PipelineRunner(comm, schedule, mine, torch.nn.functional.mse_loss,
                                    boundaries=((BATCH // m, WIDTH), torch.float32), record=True)
            with runner:
                for step, (x, t) in enumerate(data):
                    opt.zero_grad()
                    loss = runner.step(x, t)
                    opt.step()
                    if last:
                        print("step %2d  loss %.6f" % (step, loss), flush=True)
                timeline = runner.timeline

            # The schedule alone, under the per-stage times this run measured.
            with timeline, schedule.simulate(**measured_costs(schedule, timeline)) as sim:
                if comm.rank == 0:
                    print("pipeline_torch: %s, %d ranks, %d stages, %d micro-batches" %
                          (schedule.kind.name.lower(), comm.size, S, m))
                    print("  measured makespan  %.3f ms (bubble %.1f%%)" % (timeline.makespan * 1e3,
                                                                          100 * timeline.bubble_fraction))
                    print("  simulated makespan %.3f ms (bubble %.1f%%) from the measured stage times" %
                          (sim.makespan * 1e3, 100 * sim.bubble_fraction))
                    if args.svg:
                        timeline.write_svg(args.svg)
                        print("  timeline written to %s" % args.svg)

            # One process, the whole model, whole batches.
            ref = stage_module(layers, 0, 1)
            ref_opt = torch.optim.SGD(ref.parameters(), lr=LR)
            for x, t in data:
                ref_opt.zero_grad()
                torch.nn.functional.mse_loss(ref(x), t).backward()
                ref_opt.step()
            ref_params = list(ref.parameters())
            per = LAYERS // S
            worst = 0.0
            for s, mod in mine.items():
                for got, want in zip(mod.parameters(), ref_params[2 * s * per:2 * (s + 1) * per]):
                    scale = float(want.detach().abs().max())
                    worst = max(worst, float((got - want).detach().abs().max()) / scale)
        verdict = np.array([worst], dtype=np.float64)
        comm.allreduce(verdict, op=weft.MAX)
        ok = verdict[0] <= TOL
        if comm.rank == 0:
            print("pipeline_torch: worst relative parameter error against one process %.2g (tolerance %g): %s"
                  % (verdict[0], TOL, "ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
