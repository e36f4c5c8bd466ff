#!/usr/bin/python3
"""Compares weft_redistribute with the plain collective that does the same data movement, and
both with Open MPI, on this machine in one run. Called by bench/compare-redistribution, which
builds what this needs; run that rather than this file.

Pairs (weft-bench's redist_* rows are sized so that they move the same bytes per rank as the
collective of the same size, and use its busbw factor; tools/weft-bench/redistribution.h):

  S(0) -> R        redist_s2r   vs  allgather        (MPI_Allgather)
  P(sum) -> S(0)   redist_p2s   vs  reduce_scatter   (MPI_Reduce_scatter_block)
  S(0) -> S(1)     redist_s0s1  vs  alltoall         (MPI_Alltoall)

For each rank count and size, weft-bench runs the six (collective then redistribution, pair by
pair) in one process, then bench/mpi_bench.c the three collectives; the whole set is repeated
--repeat times. A ratio redistribution / collective is taken within one weft-bench process (the
two ran within a second of each other), and the tables show each busbw's median over the
repeats and the median (and range) of the per-repeat ratios, checked against issue 11's targets.
"""
import argparse
import csv
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_host as ch  # noqa: E402  (same timing rule, same runners, same CSV rows)

ROOT = ch.ROOT
# (collective, redistribution, placement change, target ratio redistribution/collective busbw)
PAIRS = [
    ("allgather", "redist_s2r", "S(0) -> R", 0.95),
    ("reduce_scatter", "redist_p2s", "P(sum) -> S(0)", 0.95),
    ("alltoall", "redist_s0s1", "S(0) -> S(1)", 0.80),
]
# (size, size, factor, timed iterations, warmup iterations): one run per size, the same
# iteration counts for both libraries.
FULL_BANDS = [
    ("1M", "1M", 2, 40, 10),
    ("2M", "2M", 2, 40, 10),
    ("4M", "4M", 2, 20, 5),
    ("8M", "8M", 2, 20, 5),
    ("16M", "16M", 2, 20, 5),
    ("32M", "32M", 2, 10, 3),
    ("64M", "64M", 2, 10, 3),
]
QUICK_BANDS = [("1M", "1M", 2, 5, 1), ("4M", "4M", 2, 5, 1)]


def weft_cmd(build, nranks, band, colls, check, csv_path):
    lo, hi, factor, iters, warmup = band
    return [os.path.join(build, "bin", "weftrun"), "--timeout", "900", "-n", str(nranks),
            os.path.join(build, "bin", "weft-bench"), "-c", ",".join(colls), "-b", lo, "-e", hi,
            "-f", str(factor), "-n", str(iters), "-w", str(warmup), "-d", "float", "-o", "sum",
            "--check", str(check), "--csv", csv_path]


def git_state():
    head = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %s"], capture_output=True,
                          text=True).stdout.strip() or "? (not a git checkout)"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"], capture_output=True,
                           text=True).stdout.splitlines()
    if dirty:
        head += f" (plus {len(dirty)} uncommitted paths)"
    return head


def median_rows(rows):
    """One row per (library, collective, nranks, bytes): the median busbw and time over repeats,
    the busbw of each repeat, and the largest wrong count seen."""
    groups = {}
    for r in rows:
        groups.setdefault((r["library"], r["collective"], r["nranks"], r["bytes"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        out[key] = {
            "busbw": statistics.median(r["busbw"] for r in rs),
            "time_us": statistics.median(r["time_us"] for r in rs),
            "wrong": max(r["wrong"] for r in rs),
            "by_rep": {r["rep"]: r["busbw"] for r in rs},
        }
    return out


def paired_ratios(r, c):
    """redistribution / collective busbw within each repeat (the same weft-bench process)."""
    if not r or not c:
        return []
    return [r["by_rep"][k] / c["by_rep"][k] for k in sorted(r["by_rep"]) if c["by_rep"].get(k)]


def fmt(x, spec=".2f"):
    return format(x, spec) if x is not None else "-"


def tables(med, pairs, ranks):
    """One table per pair and rank count, and the verdicts against the targets."""
    out, verdicts = [], []
    for coll, redist, change, target in pairs:
        for n in ranks:
            sizes = sorted({k[3] for k in med if k[1] == coll and k[2] == n})
            rsizes = sorted({k[3] for k in med if k[1] == redist and k[2] == n})
            if not sizes:
                continue
            out.append(f"\n== {change}: weft_redistribute ({redist}) vs weft {coll} vs Open MPI, {n} ranks "
                       f"(busbw GB/s, median of repeats; target redist/{coll} >= {target:.2f})")
            head = (f"{'size':>8} | {'weft ' + coll:>20} | {'weft redist':>11} | {'redist/coll':>11} | "
                    f"{'range':>11} | {'MPI':>7} | {'coll/MPI':>8} | {'redist/MPI':>10}")
            out.append(head)
            out.append("-" * len(head))
            ratios = []
            for size in sizes:
                # A redistribution's size can sit a little below the collective's where the 2-d
                # grid does not divide it (busbw is per byte): take the largest within 10%.
                near = [x for x in rsizes if size * 0.9 < x <= size]
                c = med.get(("weft", coll, n, size))
                r = med.get(("weft", redist, n, near[-1])) if near else None
                m = med.get(("openmpi", coll, n, size))
                cb = c["busbw"] if c else None
                rb = r["busbw"] if r else None
                mb = m["busbw"] if m else None
                pr = paired_ratios(r, c)
                q = statistics.median(pr) if pr else None
                span = f"{min(pr):.2f}..{max(pr):.2f}" if len(pr) > 1 else "-"
                ratios.append(q)
                flag = "  " if q is None else ("  " if q >= target else " <")
                bad = lambda row: "!" if row and row["wrong"] > 0 else " "
                out.append(f"{ch.human(size):>8} | {fmt(cb, '20.2f')}{bad(c)}| {fmt(rb, '11.2f')}{bad(r)}| "
                           f"{fmt(q, '9.3f')}{flag}| {span:>11} | {fmt(mb, '7.2f')}{bad(m)}| "
                           f"{fmt(ch.ratio(cb, mb), '8.2f')} | {fmt(ch.ratio(rb, mb), '10.2f')}")
            got = [q for q in ratios if q is not None]
            if got:
                lo = min(got)
                out.append(f"{'geomean':>8} | {'':>20} | {'':>11} | {fmt(ch.geomean(got), '9.3f')}   |")
                verdicts.append(f"{change:<15} {n} ranks: redist/{coll} min {lo:.3f}, geomean "
                                f"{ch.geomean(got):.3f}; target {target:.2f}: "
                                f"{'met' if lo >= target else 'MISSED'}")
    return "\n".join(out), verdicts


def main():
    ap = argparse.ArgumentParser(description="weft_redistribute vs weft's collectives vs Open MPI (host memory).")
    ap.add_argument("--quick", action="store_true", help="2 sizes, 5 iterations, 1 repeat: a smoke run")
    ap.add_argument("--ranks", default="2 4", help='rank counts (default "2 4")')
    ap.add_argument("--repeat", type=int, help="times the whole set runs (default 3; --quick 1)")
    ap.add_argument("--libraries", default="weft openmpi", help="subset of: weft openmpi")
    ap.add_argument("--no-check", action="store_true", help="skip the result checks")
    ap.add_argument("--out", help="results folder (default bench/results; with --quick BUILD/bench/results-quick)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="weft build folder")
    a = ap.parse_args()

    ranks = [int(x) for x in a.ranks.replace(",", " ").split()]
    if not ranks or min(ranks) < 1:
        ap.error("--ranks needs positive rank counts")
    libs = [l for l in a.libraries.replace(",", " ").split() if l]
    if any(l not in ("weft", "openmpi") for l in libs) or "weft" not in libs:
        ap.error("--libraries: weft, optionally with openmpi")
    repeat = a.repeat if a.repeat else (1 if a.quick else 3)
    build = os.path.abspath(a.build)
    out = os.path.abspath(a.out or (os.path.join(build, "bench", "results-quick") if a.quick
                                    else os.path.join(ROOT, "bench", "results")))
    os.makedirs(out, exist_ok=True)
    work = os.path.join(build, "bench", "runs-redistribution")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    bands = QUICK_BANDS if a.quick else FULL_BANDS
    check = 0 if a.no_check else 1
    weft_colls = [x for p in PAIRS for x in p[:2]]
    mpi_colls = [p[0] for p in PAIRS]

    env = dict(os.environ)
    started = datetime.datetime.now()
    t_start = time.time()
    load_before = ch.loadavg()
    log_path = os.path.join(work, "compare-redistribution.log")
    rows, failures, others = [], [], []
    print(f"compare-redistribution: ranks {' '.join(map(str, ranks))}; {'quick' if a.quick else 'full'} run, "
          f"{repeat} repeat(s); raw output in {log_path}", flush=True)
    with open(log_path, "w") as log:
        for rep in range(repeat):
            for n in ranks:
                for bi, band in enumerate(bands):
                    for lib in libs:  # interleaved, so load changes hit both alike
                        path = os.path.join(work, f"{lib}-n{n}-band{bi}-rep{rep}.csv")
                        if lib == "weft":
                            cmd = weft_cmd(build, n, band, weft_colls, check, path)
                        else:
                            cmd = ch.commands("openmpi", n, band, mpi_colls, check, build, path)
                        other = ch.others_running()
                        if other is not None:
                            others.append(other)
                        t0 = time.time()
                        ok = ch.run(cmd, env, log, timeout=900)
                        got = ch.read_rows(path)
                        for r in got:
                            r["rep"] = rep
                        rows += got
                        print(f"  rep {rep + 1}/{repeat} {lib:8s} {n} ranks {band[0]:>4} x{band[3]:<3}"
                              f" {time.time() - t0:6.1f} s  {'ok' if ok else 'FAILED'}"
                              f"  (other runnable tasks before: {other if other is not None else '?'})", flush=True)
                        if not ok:
                            failures.append(f"{lib} {n} ranks {band[0]} repeat {rep + 1} (see {log_path})")
    elapsed = time.time() - t_start
    load_after = ch.loadavg()
    for r in rows:
        if r["wrong"] > 0:
            failures.append(f"{r['library']} {r['collective']} {r['nranks']} ranks {r['bytes']} B: {r['wrong']} wrong")

    stem = "compare-redistribution-quick" if a.quick else "compare-redistribution"
    csv_path, txt_path = (os.path.join(out, stem + ext) for ext in (".csv", ".txt"))
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ch.FIELDS + ["rep"])
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.3f}" if k == "time_us" else f"{r[k]:.6f}" if k in ("algbw", "busbw") else r[k])
                        for k in ch.FIELDS + ["rep"]})

    try:
        ompi_version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                                      timeout=60).stdout.splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        ompi_version = "?"
    ucx = {k: v for k, v in os.environ.items() if k.startswith(("UCX_", "WEFT_"))}
    header = [
        f"# compare-redistribution {'(quick) ' if a.quick else ''}{started:%Y-%m-%d %H:%M}, {elapsed:.0f} s; "
        f"weft at {git_state()}; build {build}",
        f"# host: {platform.node()}, {os.cpu_count()} CPUs ({ch.cpu_model()}); load average {load_before} before, "
        f"{load_after} after; other runnable tasks between runs: "
        f"{(f'mean {sum(others) / len(others):.1f}, max {max(others):.1f}') if others else '?'}",
        f"# weft: weft-bench, default transport (UCX; env {ucx or 'unset'}); redist_*: weft_redistribute on a "
        f"1-d mesh of all ranks, 2-d float32 tensor, timed call only",
        f"# Open MPI: {ompi_version}; {' '.join(ch.MPIRUN[1:])}",
        "# float32 sum; per size: W warmup iterations, barrier, N timed iterations, time = slowest rank's average;",
        "# sizes (N timed / W warmup), one run per size and library: " +
        ", ".join(f"{b[0]} {b[3]}/{b[4]}" for b in bands) +
        f"; the set repeated {repeat} times; busbw = median over repeats; redist/coll = median (range) of the "
        "per-repeat ratios, both from one weft-bench process",
        "# sizes as nccl-tests: allgather's receive buffer = redist_s2r's global tensor; reduce_scatter's send "
        "buffer = redist_p2s's global tensor;",
        "# alltoall's per-rank buffer = redist_s0s1's per-rank piece (its global tensor is nranks times that); "
        "busbw factor (n-1)/n for all",
        "# '<' marks a ratio below its target, '!' a row whose check found wrong elements",
    ]
    busy = ch.busy_warning(load_before, others)
    if busy:
        header.append("# " + busy)
    med = median_rows(rows)
    body, verdicts = tables(med, PAIRS, ranks)
    text = "\n".join(header) + "\n" + body + "\n\nTargets (issue 11), median ratio at every size:\n" + \
        "\n".join("  " + v for v in verdicts) + "\n"
    if failures:
        text += "\nFAILURES:\n" + "\n".join("  " + f for f in failures) + "\n"
    with open(txt_path, "w") as f:
        f.write(text)
    print(text)
    print(f"compare-redistribution: wrote {csv_path}, {txt_path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
