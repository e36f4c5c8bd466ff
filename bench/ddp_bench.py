#!/usr/bin/python3
"""ddp_bench: torch DDP over weft against DDP over gloo, same model, same run (issue 12).

    build/bin/weftrun -n 2 /usr/bin/python3 bench/ddp_bench.py [--layers 8 --width 1024 --batch 8 --steps 20]

The model is `layers` x Linear(width, width) (float32, CPU, one torch thread per rank, SGD lr 0.01),
as the issue measured it. In one job, per repeat and in alternating order: DDP over a "gloo"
group and DDP over a "weft" group (torch.distributed.new_group; DDP's default 25 MiB buckets),
each `steps` timed steps after 3 warm-up steps; and, on rank 0 alone while the others wait, the
same model without DDP (the one-process step time). Time per step is the slowest rank's mean.
Prints one row per (backend, repeat) and the medians with the ratio weft/gloo in steps per
second. Each DDP run ends with a check that every rank holds the same parameters (DDP's
invariant), so a wrong all-reduce cannot pass as a fast one.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import weft.torch  # noqa: E402,F401  (registers the backend)


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def make_model(args):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(args.width, args.width) for _ in range(args.layers)])


def run_steps(model, opt, args, steps, rank):
    torch.manual_seed(100 + rank)
    x = torch.randn(args.batch, args.width)
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        model(x).square().mean().backward()
        opt.step()


def time_ddp(group, args, rank, size):
    model = DDP(make_model(args), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    run_steps(model, opt, args, 3, rank)
    dist.barrier(group)
    t0 = time.perf_counter()
    run_steps(model, opt, args, args.steps, rank)
    mine = torch.tensor([(time.perf_counter() - t0) / args.steps])
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # over the default (gloo) group
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    first = flat.clone()
    dist.broadcast(first, 0)
    if not torch.equal(flat, first):
        raise SystemExit("ddp_bench: rank %d's parameters differ from rank 0's after DDP training" % rank)
    return mine.item() * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"gloo": dist.new_group(backend="gloo"), "weft": dist.new_group(backend="weft")}
    rows = {"gloo": [], "weft": [], "one process": []}
    sha = commit()
    for rep in range(args.repeats):
        order = ["gloo", "weft"] if rep % 2 == 0 else ["weft", "gloo"]
        for name in order:
            ms = time_ddp(groups[name], args, rank, size)
            rows[name].append(ms)
            if rank == 0:
                print("%s ddp_bench ranks=%d backend=%s repeat=%d: %.1f ms/step" % (sha, size, name, rep, ms), flush=True)
        dist.barrier()
        if rank == 0:
            model = make_model(args)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            run_steps(model, opt, args, 3, 0)
            t0 = time.perf_counter()
            run_steps(model, opt, args, args.steps, 0)
            rows["one process"].append((time.perf_counter() - t0) / args.steps * 1e3)
        dist.barrier()
    if rank == 0:
        med = {k: statistics.median(v) for k, v in rows.items()}
        print("%s ddp_bench ranks=%d model=%dx Linear(%d) batch=%d: one process %.1f ms/step, DDP over gloo %.1f, "
              "over weft %.1f ms/step -> weft/gloo %.2fx steps per second"
              % (sha, size, args.layers, args.width, args.batch, med["one process"], med["gloo"], med["weft"],
                 med["gloo"] / med["weft"]), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
