#!/usr/bin/python3
"""ddp_bench: torch DDP over weft against DDP over gloo, and weft's ZeRO against torch's
ZeroRedundancyOptimizer over gloo, same model, same run (issue 12).

    build/bin/weftrun -n 2 /usr/bin/python3 bench/ddp_bench.py [--layers 8 --width 1024 --batch 8 --steps 20]
        [--repeats 3] [--only ddp|zero] [--bucket-view] [--bucket-mb 25] [--profile]

The model is `layers` x Linear(width, width) (float32, CPU, one torch thread per rank, SGD lr 0.01,
loss mean(out^2) over this rank's `batch` rows), as the issue measured it. In one job, per repeat
and in alternating order, each configuration runs 3 warm-up steps and `steps` timed steps on a
fresh copy of the model:

  one process      rank 0 alone while the other ranks wait (the issue's "one process")
  no comm          every rank trains its own copy at the same time, no communication: the
                   floor for any backend on this machine (ranks contend for cores and memory)
  ddp gloo/weft    DistributedDataParallel over a "gloo" / "weft" group (DDP's defaults: 25 MiB
                   buckets, gradient copies into them; --bucket-view: gradient_as_bucket_view,
                   --bucket-mb: bucket_cap_mb)
  zero gloo        DDP + torch's ZeroRedundancyOptimizer(SGD) over gloo: ZeRO-1 as torch does it
  zero torch/weft  the same over the "weft" group (torch's ZeRO on weft's backend)
  weft zero1/2     weft.Zero(stage 1 or 2, weft.SGD) on a weft mesh: gradients handed over from
                   autograd hooks during backward (reduce-scatter overlaps backward), the optimizer
                   runs in weft, the torch parameters are views of weft's parameter memory
  weft zero0       the same at stage 0 (all-reduce, nothing sharded): plain data parallelism
                   without DDP, for comparison with the DDP rows

Time per step is the slowest rank's mean wall time; cpu is the largest per-rank CPU time per step
(all threads of the process). Every run that trains one model data-parallel ends with two checks:
all ranks hold bit-identical parameters, and they equal single-process training on all ranks'
rows (each rank's `batch` rows concatenated, same steps) within --rtol of the largest parameter
magnitude (float32 sums in another order differ in the last bits). A failed check exits 1.
Prints one row per (configuration, repeat), then the medians, the ratios weft/gloo in steps per
second, and the load average (`uptime`) at start and end: other work on the machine moves wall
times, so compare rows of one run only.

--profile (sets WEFT_TORCH_PROFILE=1) prints, for DDP over weft, where each step's time went in
the weft process group: per operation kind the time queued for the worker, running (the weft
call) and completing the future, and the worker's CPU time.
"""
import argparse
import functools
import os
import statistics
import subprocess
import sys
import time

if "--profile" in sys.argv:
    os.environ["WEFT_TORCH_PROFILE"] = "1"  # read when weft.torch is imported

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import weft  # noqa: E402
import weft.torch  # noqa: E402,F401  (registers the backend)

WARMUP = 3
LR = 0.01


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def make_model(args):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(args.width, args.width) for _ in range(args.layers)])


def rank_input(args, rank):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(args.batch, args.width, generator=g)


def reference(args, size):
    """Single-process training on every rank's rows, WARMUP + steps steps: the flat parameters."""
    model = make_model(args)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x = torch.cat([rank_input(args, r) for r in range(size)])
    for _ in range(WARMUP + args.steps):
        opt.zero_grad(set_to_none=False)
        model(x).square().mean().backward()
        opt.step()
    return flat(model.parameters())


def flat(params):
    return torch.cat([p.detach().reshape(-1) for p in params])


def timed(step, args, before=None):
    """Runs WARMUP untimed and args.steps timed steps; (wall, cpu) seconds per step, max over ranks.
    before(), if given, runs just before the timed steps."""
    for _ in range(WARMUP):
        step()
    dist.barrier()
    if before is not None:
        before()
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(args.steps):
        step()
    mine = torch.tensor([(time.perf_counter() - t0) / args.steps, (time.process_time() - c0) / args.steps],
                        dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # over the default (gloo) group
    return mine[0].item(), mine[1].item()


def check(name, params, ref, args, rank):
    """Every rank's parameters bit-identical to rank 0's, and within rtol of the reference."""
    mine = flat(params)
    first = mine.clone()
    dist.broadcast(first, 0)
    same = torch.tensor([0.0 if torch.equal(mine, first) else 1.0])
    err = torch.tensor([(mine - ref).abs().max().item() / ref.abs().max().item()])
    dist.all_reduce(same, op=dist.ReduceOp.MAX)
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    if same.item():
        raise SystemExit("ddp_bench: %s: the ranks' parameters differ after training" % name)
    if not err.item() <= args.rtol:
        raise SystemExit("ddp_bench: %s: parameters differ from single-process training by %.3g of the largest "
                         "(tolerance %.3g)" % (name, err.item(), args.rtol))
    return err.item()


def sgd_steps(model, opt, x):
    def step():
        opt.zero_grad(set_to_none=False)
        model(x).square().mean().backward()
        opt.step()
    return step


# ------------------------------------------------------------------ configurations

def run_one_process(ctx):
    args, rank = ctx["args"], ctx["rank"]
    dist.barrier()
    wall = cpu = 0.0
    if rank == 0:
        model = make_model(args)
        step = sgd_steps(model, torch.optim.SGD(model.parameters(), lr=LR), rank_input(args, 0))
        for _ in range(WARMUP):
            step()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(args.steps):
            step()
        wall, cpu = (time.perf_counter() - t0) / args.steps, (time.process_time() - c0) / args.steps
    dist.barrier()
    return wall, cpu, None


def run_no_comm(ctx):
    args, rank = ctx["args"], ctx["rank"]
    model = make_model(args)
    wall, cpu = timed(sgd_steps(model, torch.optim.SGD(model.parameters(), lr=LR), rank_input(args, rank)), args)
    return wall, cpu, None


def run_ddp(ctx, backend):
    args, rank = ctx["args"], ctx["rank"]
    group = ctx["groups"][backend]
    model = DDP(make_model(args), process_group=group, gradient_as_bucket_view=args.bucket_view,
                bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    step = sgd_steps(model, opt, rank_input(args, rank))
    if backend == "weft" and args.profile:
        wall, cpu = timed(step, args, before=lambda: group.profile(reset=True))
        ctx["profiles"].append(group.profile(reset=True))
    else:
        wall, cpu = timed(step, args)
    return wall, cpu, check("ddp " + backend, model.parameters(), ctx["ref"], args, rank)


def run_torch_zero(ctx, backend):
    args, rank = ctx["args"], ctx["rank"]
    group = ctx["groups"][backend]
    model = DDP(make_model(args), process_group=group, gradient_as_bucket_view=args.bucket_view,
                bucket_cap_mb=args.bucket_mb)
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, process_group=group, lr=LR)
    wall, cpu = timed(sgd_steps(model, opt, rank_input(args, rank)), args)
    return wall, cpu, check("zero " + backend, model.parameters(), ctx["ref"], args, rank)


def _grad_ready(zero, i, grad):
    zero.grad_ready(i, grad.contiguous())


def run_weft_zero(ctx, stage):
    """weft.Zero fed from autograd: each parameter's gradient goes to grad_ready as backward
    produces it (a group's reduce-scatter starts while backward goes on); step() runs SGD on this
    rank's shard and all-gathers; the torch parameters are views of weft's parameters."""
    args, rank = ctx["args"], ctx["rank"]
    model = make_model(args)
    params = list(model.parameters())
    zero = weft.Zero(ctx["mesh"], "dp", [p.detach() for p in params], stage=stage, optimizer=weft.SGD(lr=LR))
    try:
        def point():  # the views are valid until the next step(): take them again after each
            for i, p in enumerate(params):
                p.data = zero.param(i, like="torch")
        point()
        for i, p in enumerate(params):
            p.register_hook(functools.partial(_grad_ready, zero, i))
        x = rank_input(args, rank)

        def step():
            for p in params:
                p.grad = None  # autograd then keeps the gradient it made: no accumulation pass
            model(x).square().mean().backward()
            zero.step()
            point()
        wall, cpu = timed(step, args)
        err = check("weft zero%d" % stage, params, ctx["ref"], args, rank)
    finally:
        for p in params:
            p.data = torch.empty(0)
        zero.close()
    return wall, cpu, err


CONFIGS = {
    "one process": run_one_process,
    "no comm": run_no_comm,
    "ddp gloo": functools.partial(run_ddp, backend="gloo"),
    "ddp weft": functools.partial(run_ddp, backend="weft"),
    "zero gloo": functools.partial(run_torch_zero, backend="gloo"),
    "zero torch/weft": functools.partial(run_torch_zero, backend="weft"),
    "weft zero0": functools.partial(run_weft_zero, stage=0),
    "weft zero1": functools.partial(run_weft_zero, stage=1),
    "weft zero2": functools.partial(run_weft_zero, stage=2),
}
GROUPS = {"ddp": ["one process", "no comm", "ddp gloo", "ddp weft"],
          "zero": ["zero gloo", "zero torch/weft", "weft zero0", "weft zero1", "weft zero2"]}


def print_profile(profiles, steps):
    total = {}
    for p in profiles:
        for what, op in p.items():
            t = total.setdefault(what, [0] * 6)
            for k, v in enumerate(op):
                t[k] += v
    n = len(profiles) * steps
    for what, (count, nbytes, queued, ran, completed, cpu) in sorted(total.items()):
        print("  profile ddp weft, rank 0, per step: %d x %s (%.1f MB): queued %.2f ms, ran %.2f ms, completed "
              "%.3f ms; worker cpu %.2f ms" % (count / n, what, nbytes / n / 1e6, queued / n * 1e3, ran / n * 1e3,
                                               completed / n * 1e3, cpu / n * 1e3), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=sorted(GROUPS), help="run only the DDP or only the ZeRO configurations")
    ap.add_argument("--bucket-view", action="store_true", help="DDP(gradient_as_bucket_view=True) for every DDP run")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb for every DDP run (25)")
    ap.add_argument("--rtol", type=float, default=1e-5,
                    help="largest allowed max|p - p_ref| / max|p_ref| against single-process training")
    ap.add_argument("--profile", action="store_true", help="where DDP over weft spends its time (WEFT_TORCH_PROFILE)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    load_start = load()
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    names = GROUPS[args.only] if args.only else GROUPS["ddp"] + GROUPS["zero"]
    ctx = {"args": args, "rank": rank, "size": size, "profiles": [],
           "groups": {"gloo": dist.new_group(backend="gloo"), "weft": dist.new_group(backend="weft")}}
    if any(n.startswith("weft zero") for n in names):
        ctx["comm"] = weft.Comm.from_env(name="ddp_bench zero")
        ctx["mesh"] = weft.Mesh(ctx["comm"], (size,), ("dp",))
    ctx["ref"] = reference(args, size)
    rows = {n: [] for n in names}
    sha = commit()
    for rep in range(args.repeats):
        for name in names if rep % 2 == 0 else names[::-1]:
            wall, cpu, err = CONFIGS[name](ctx)
            rows[name].append((wall * 1e3, cpu * 1e3))
            if rank == 0:
                print("%s ddp_bench ranks=%d %s repeat=%d: %.1f ms/step, cpu %.1f ms/step%s"
                      % (sha, size, name, rep, wall * 1e3, cpu * 1e3,
                         "" if err is None else ", max|p - p_ref|/max|p_ref| %.1e" % err), flush=True)
    if rank == 0:
        med = {n: statistics.median(w for w, _ in v) for n, v in rows.items()}
        cpu = {n: statistics.median(c for _, c in v) for n, v in rows.items()}
        print("%s ddp_bench ranks=%d model=%dx Linear(%d) batch=%d steps=%d repeats=%d bucket_cap_mb=%g%s, "
              "load %s -> %s:" % (sha, size, args.layers, args.width, args.batch, args.steps, args.repeats,
                                  args.bucket_mb, " bucket-view" if args.bucket_view else "", load_start, load()),
              flush=True)
        for n in names:
            print("  %-16s %7.1f ms/step (median), cpu %6.1f ms/step" % (n, med[n], cpu[n]), flush=True)
        if "ddp weft" in med:
            print("  DDP: weft/gloo %.2fx steps per second; the floor (no comm) would be %.2fx"
                  % (med["ddp gloo"] / med["ddp weft"], med["ddp gloo"] / med["no comm"]), flush=True)
        if "weft zero1" in med:
            print("  ZeRO: weft zero1/torch zero over gloo %.2fx, weft zero2 %.2fx, torch zero over weft %.2fx steps "
                  "per second" % (med["zero gloo"] / med["weft zero1"], med["zero gloo"] / med["weft zero2"],
                                  med["zero gloo"] / med["zero torch/weft"]), flush=True)
        if "weft zero0" in med and "ddp gloo" in med:
            print("  data parallel without DDP: weft zero0/DDP over gloo %.2fx steps per second"
                  % (med["ddp gloo"] / med["weft zero0"]), flush=True)
        if ctx["profiles"]:
            print_profile(ctx["profiles"], args.steps)
    if "mesh" in ctx:
        ctx["mesh"].close()
        ctx["comm"].close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
