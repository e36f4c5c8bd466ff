#!/usr/bin/python3
"""gloo_bench: the torch.distributed (gloo backend) peer of weft-bench, for bench/compare-host.

Same sizes, same timing rule and same CSV rows as weft-bench, float32 and SUM only: for each
size, warmup iterations, a barrier, timed iterations; each rank's average time per iteration is
reduced with MAX (the slowest rank's). Sizes follow nccl-tests (the whole message, rounded down
to a multiple of nranks elements for the block collectives). Then (unless --check 0) one run on
fresh inputs is checked exactly (small integers).

Launch with anything that sets torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    build/bin/weftrun -n 2 /usr/bin/python3 bench/gloo_bench.py -c allreduce -b 4K -e 64M -f 4

Calls: allreduce = dist.all_reduce (in place: torch has no out-of-place form), allgather =
dist.all_gather into views of one output tensor, alltoall = dist.all_to_all_single, broadcast =
dist.broadcast, reduce = dist.reduce (in place), sendrecv = isend/irecv ring. reduce_scatter:
torch 1.13's gloo backend has none, so it is reported as unsupported and produces no rows.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist

COLLS = ["allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"]
REDUCTIONS = {"allreduce", "reduce_scatter", "reduce"}


def parse_size(s):
    s = s.strip().upper().removesuffix("IB").removesuffix("B")
    mult = 1
    if s and s[-1] in "KMG":
        mult = 1 << {"K": 10, "M": 20, "G": 30}[s[-1]]
        s = s[:-1]
    return int(s) * mult


def shape_of(coll, nbytes, n):
    """(param, sendcount, recvcount, count) in float32 elements, nccl-tests' convention."""
    total = nbytes // 4
    if coll == "allgather":
        p = total // n
        return p, p, p * n, p * n
    if coll == "reduce_scatter":
        p = total // n
        return p, p * n, p, p * n
    if coll == "alltoall":
        p = total // n
        return p, p * n, p * n, p * n
    return total, total, total, total


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in ("allgather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


# Inputs: small integers, so float sums are exact whatever the order (as mpi_bench.c).
def reduce_input(r, idx):
    return ((idx * 5 + r * 3 + 1) % 8).to(torch.float32)


def pattern(r, idx):
    return ((idx * 7 + r * 131 + 3) % ((1 << 20) + 1)).to(torch.float32)


def reduced(n, idx):
    acc = torch.zeros(idx.numel(), dtype=torch.float32)
    for r in range(n):
        acc += reduce_input(r, idx)
    return acc


class Case:
    def __init__(self, coll, nbytes, rank, n):
        self.coll, self.rank, self.n = coll, rank, n
        self.p, self.sendcount, self.recvcount, self.count = shape_of(coll, nbytes, n)
        self.bytes = self.count * 4
        self.send = torch.zeros(self.sendcount, dtype=torch.float32)
        self.recv = torch.zeros(self.recvcount, dtype=torch.float32)
        self.fill()

    def fill(self):
        idx = torch.arange(self.sendcount, dtype=torch.int64)
        src = 0 if self.coll == "broadcast" else self.rank
        self.send.copy_(reduce_input(src, idx) if self.coll in REDUCTIONS else pattern(src, idx))
        self.recv.fill_(float("nan"))

    def run(self):
        c, n, rank = self.coll, self.n, self.rank
        if c == "allreduce":
            dist.all_reduce(self.send, op=dist.ReduceOp.SUM)
        elif c == "allgather":
            dist.all_gather(list(self.recv.view(n, self.p).unbind(0)), self.send)
        elif c == "alltoall":
            dist.all_to_all_single(self.recv, self.send)
        elif c == "broadcast":
            dist.broadcast(self.send if rank == 0 else self.recv, src=0)
        elif c == "reduce":
            dist.reduce(self.send, dst=0, op=dist.ReduceOp.SUM)
        elif c == "sendrecv":
            reqs = [dist.irecv(self.recv, (rank - 1) % n), dist.isend(self.send, (rank + 1) % n)]
            for q in reqs:
                q.wait()
        else:
            raise NotImplementedError(c)

    def count_wrong(self):
        c, n, rank, p = self.coll, self.n, self.rank, self.p
        if c in ("allreduce", "reduce"):
            if c == "reduce" and rank != 0:
                return 0
            got, want = self.send, reduced(n, torch.arange(p, dtype=torch.int64))
        elif c == "allgather":
            got, want = self.recv, torch.cat([pattern(r, torch.arange(p, dtype=torch.int64)) for r in range(n)])
        elif c == "alltoall":
            got = self.recv
            want = torch.cat([pattern(r, rank * p + torch.arange(p, dtype=torch.int64)) for r in range(n)])
        elif c == "broadcast":
            if rank == 0:
                return 0
            got, want = self.recv, pattern(0, torch.arange(p, dtype=torch.int64))
        else:  # sendrecv
            got, want = self.recv, pattern((rank - 1) % n, torch.arange(p, dtype=torch.int64))
        return int((got != want).sum().item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-c", default="allreduce", help="comma-separated collectives")
    ap.add_argument("-b", default="32M")
    ap.add_argument("-e", default="32M")
    ap.add_argument("-f", type=float, default=2.0)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("--check", type=int, default=1)
    ap.add_argument("--csv")
    a = ap.parse_args()
    colls = [c for c in a.c.split(",") if c]
    for c in colls:
        if c not in COLLS:
            ap.error(f"unknown collective {c}")
    if a.f <= 1 or a.n < 1 or a.w < 0:
        ap.error("need -f > 1, -n >= 1, -w >= 0")

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    sizes = []
    b, e = parse_size(a.b), parse_size(a.e)
    while b <= e:
        sizes.append(b)
        b = max(b + 1, int(b * a.f))

    csv = None
    if rank == 0:
        print(f"# gloo_bench: torch {torch.__version__} gloo\n# nRanks {n} minBytes {parse_size(a.b)} "
              f"maxBytes {e} step: {a.f:g}(factor) warmup iters: {a.w} iters: {a.n} validation: {a.check}")
        if a.csv:
            csv = open(a.csv, "w")
            csv.write("library,collective,nranks,bytes,count,dtype,time_us,algbw,busbw,wrong\n")
    total_wrong, bw = 0, []
    for coll in colls:
        if rank == 0:
            print(f"#\n# Collective: {coll}")
        if coll == "reduce_scatter":
            if rank == 0:
                print("# not supported by torch's gloo backend (1.13): no rows")
            continue
        if rank == 0:
            print(f"#{'size':>11}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  "
                  f"{'algbw':>6}  {'busbw':>6}  {'#wrong':>6}")
        for nbytes in sizes:
            case = Case(coll, nbytes, rank, n)
            for _ in range(a.w):
                case.run()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.n):
                case.run()
            mine = torch.tensor([(time.perf_counter() - t0) / a.n * 1e6], dtype=torch.float64)
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            slowest = mine.item()
            wrong = -1
            if a.check:
                case.fill()
                case.run()
                w = torch.tensor([case.count_wrong()], dtype=torch.int64)
                dist.all_reduce(w, op=dist.ReduceOp.SUM)
                wrong = int(w.item())
                total_wrong += max(wrong, 0)
            algbw = case.bytes / (slowest * 1e-6) / 1e9 if slowest > 0 else 0.0
            busbw = algbw * bus_factor(coll, n)
            bw.append(busbw)
            if rank == 0:
                redop = "sum" if coll in REDUCTIONS else "none"
                root = 0 if coll in ("broadcast", "reduce") else -1
                print(f"{case.bytes:12d}  {case.count:12d}  {'float':>8}  {redop:>6}  {root:6d}  {slowest:7.2f}  "
                      f"{algbw:6.2f}  {busbw:6.2f}  {wrong if wrong >= 0 else 'N/A':>6}", flush=True)
                if csv:
                    csv.write(f"gloo,{coll},{n},{case.bytes},{case.count},float,{slowest:.3f},{algbw:.6f},"
                              f"{busbw:.6f},{wrong}\n")
                    csv.flush()
    if rank == 0:
        print(f"# Out of bounds values : {total_wrong} {'FAILED' if total_wrong else 'OK'}")
        print(f"# Avg bus bandwidth    : {sum(bw) / len(bw) if bw else 0.0:g} \n#")
        if csv:
            csv.close()
    dist.barrier()
    dist.destroy_process_group()
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
