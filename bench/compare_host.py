#!/usr/bin/python3
"""Runs weft-bench, Open MPI (bench/mpi_bench.c) and torch.distributed/gloo (bench/gloo_bench.py)
on this machine in one run and compares them. Called by bench/compare-host, which installs and
builds what this needs; run that rather than this file.

The three benchmarks share one definition: sizes as nccl-tests (the whole message), float32 SUM,
per size W warmup iterations, a barrier, N timed iterations, time = the slowest rank's average;
busbw = size / time * nccl-tests' factor. A size band uses the same N and W for every library.
"""
import argparse
import csv
import datetime
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBS = ["weft", "openmpi", "gloo"]
LIB_TITLES = {"weft": "weft", "openmpi": "Open MPI", "gloo": "gloo"}
ALL_COLLS = ["allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"]
DEFAULT_COLLS = ["allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast"]
FIELDS = ["library", "collective", "nranks", "bytes", "count", "dtype", "time_us", "algbw", "busbw", "wrong"]

# (min size, max size, factor, timed iterations, warmup iterations): fewer iterations for
# big messages (gloo and today's weft take tens of ms there), the same for all libraries.
FULL_BANDS = [
    ("4K", "64K", 4, 50, 10),
    ("256K", "1M", 4, 20, 5),
    ("4M", "16M", 4, 10, 3),
    ("64M", "64M", 4, 5, 2),
]
QUICK_BANDS = [("4K", "1M", 16, 5, 1)]

MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
          "--mca", "pml", "ob1", "--mca", "btl", "self,vader"]


def human(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def busy_warning(load_before, others):
    """A warning when others kept the machine busy: the 1-minute load average before the first
    run (ours add to it afterwards), or the mean number of other runnable tasks seen between
    runs, above half the CPUs."""
    try:
        load = float(load_before.split()[0])
    except (ValueError, IndexError):
        load = 0.0
    mean_others = sum(others) / len(others) if others else 0.0
    cpus = os.cpu_count() or 1
    if max(load, mean_others) <= cpus / 2:
        return ""
    return (f"WARNING: the machine was busy (1-minute load average {load:.1f} before the run, "
            f"{mean_others:.1f} other runnable tasks on average between runs, {cpus} CPUs): "
            f"expect noise, above all at small sizes, and repeat before trusting a difference")


def others_running(samples=5, gap=0.02):
    """Mean number of runnable tasks other than this one, from a few looks at /proc/loadavg
    between benchmark runs (when none of our ranks exist): what else keeps the CPUs busy."""
    seen = []
    for _ in range(samples):
        try:
            with open("/proc/loadavg") as f:
                seen.append(max(0, int(f.read().split()[3].split("/")[0]) - 1))
        except (OSError, ValueError, IndexError):
            return None
        time.sleep(gap)
    return sum(seen) / len(seen)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def run(cmd, env, log, timeout):
    """Runs one benchmark; returns True on exit status 0. Output goes to the log file."""
    log.write(f"\n$ {' '.join(cmd)}\n")
    log.flush()
    try:
        p = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        log.write(f"# timed out after {timeout} s\n")
        return False
    log.write(f"# exit status {p.returncode}\n")
    return p.returncode == 0


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["nranks"], r["bytes"], r["count"], r["wrong"] = int(r["nranks"]), int(r["bytes"]), int(r["count"]), int(r["wrong"])
        r["time_us"], r["algbw"], r["busbw"] = float(r["time_us"]), float(r["algbw"]), float(r["busbw"])
    return rows


def commands(lib, nranks, band, colls, check, build, csv_path):
    lo, hi, factor, iters, warmup = band
    common = ["-c", ",".join(colls), "-b", lo, "-e", hi, "-f", str(factor), "-n", str(iters), "-w", str(warmup)]
    weftrun = [os.path.join(build, "bin", "weftrun"), "--timeout", "900", "-n", str(nranks)]
    if lib == "weft":
        return weftrun + [os.path.join(build, "bin", "weft-bench")] + common + [
            "-d", "float", "-o", "sum", "--check", str(check), "--csv", csv_path]
    if lib == "openmpi":
        return MPIRUN + ["-np", str(nranks), os.path.join(build, "bench", "mpi_bench")] + common + [
            "--check", str(check), "--csv", csv_path]
    return weftrun + ["/usr/bin/python3", os.path.join(ROOT, "bench", "gloo_bench.py")] + common + [
        "--check", str(check), "--csv", csv_path]


def ratio(a, b):
    return a / b if a and b else None


def geomean(xs):
    xs = [x for x in xs if x]
    if not xs:
        return None
    prod = 1.0
    for x in xs:
        prod *= x
    return prod ** (1.0 / len(xs))


def fmt_ratio(x):
    return f"{x:.3f}" if x is not None else "-"


def tables(rows, colls, ranks):
    """One text table per collective and rank count."""
    by = {(r["library"], r["collective"], r["nranks"], r["bytes"]): r for r in rows}
    out = []
    for coll in colls:
        for n in ranks:
            sizes = sorted({r["bytes"] for r in rows if r["collective"] == coll and r["nranks"] == n})
            if not sizes:
                continue
            out.append(f"\n== {coll}, {n} ranks: time in us, busbw in GB/s; ratios are weft busbw / peer busbw "
                       f"(>1: weft faster)")
            head = f"{'size':>9} | {'weft time':>10} {'busbw':>7} | {'MPI time':>10} {'busbw':>7} | " \
                   f"{'gloo time':>10} {'busbw':>7} | {'weft/MPI':>8} {'weft/gloo':>9}"
            out.append(head)
            out.append("-" * len(head))
            r_mpi, r_gloo = [], []
            for size in sizes:
                cells = []
                bw = {}
                for lib in LIBS:
                    r = by.get((lib, coll, n, size))
                    if r:
                        bw[lib] = r["busbw"]
                        bad = "!" if r["wrong"] > 0 else " "
                        cells.append(f"{r['time_us']:10.1f} {r['busbw']:7.3f}{bad}")
                    else:
                        cells.append(f"{'-':>10} {'-':>7} ")
                a, b = ratio(bw.get("weft"), bw.get("openmpi")), ratio(bw.get("weft"), bw.get("gloo"))
                r_mpi.append(a)
                r_gloo.append(b)
                out.append(f"{human(size):>9} |" + "|".join(cells) + f"| {fmt_ratio(a):>8} {fmt_ratio(b):>9}")
            out.append(f"{'geomean':>9} |{'':>19}|{'':>19}|{'':>19}| {fmt_ratio(geomean(r_mpi)):>8} "
                       f"{fmt_ratio(geomean(r_gloo)):>9}")
            if coll == "reduce_scatter" and not any(k[0] == "gloo" and k[1] == coll for k in by):
                out.append("(gloo: torch 1.13's gloo backend has no reduce_scatter)")
    return "\n".join(out)


def plot(rows, colls, ranks, png, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FixedFormatter

    fig, axes = plt.subplots(len(colls), len(ranks), figsize=(5.2 * len(ranks), 3.0 * len(colls)),
                             squeeze=False, sharex=True)
    styles = {"weft": ("tab:blue", "o"), "openmpi": ("tab:orange", "s"), "gloo": ("tab:green", "^")}
    sizes = sorted({r["bytes"] for r in rows})
    for i, coll in enumerate(colls):
        for j, n in enumerate(ranks):
            ax = axes[i][j]
            for lib in LIBS:
                pts = sorted((r["bytes"], r["busbw"]) for r in rows
                             if r["library"] == lib and r["collective"] == coll and r["nranks"] == n and r["busbw"] > 0)
                if pts:
                    color, marker = styles[lib]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color,
                            label=LIB_TITLES[lib], linewidth=1.5, markersize=4)
                elif lib == "gloo" and coll == "reduce_scatter":
                    ax.text(0.98, 0.04, "gloo: not supported", transform=ax.transAxes, fontsize=8,
                            color="tab:green", ha="right")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{coll}, {n} ranks", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if sizes:
                ax.xaxis.set_major_locator(FixedLocator(sizes))
                ax.xaxis.set_major_formatter(FixedFormatter([human(s).replace(" ", "") for s in sizes]))
                ax.xaxis.set_minor_locator(FixedLocator([]))
            if j == 0:
                ax.set_ylabel("busbw (GB/s)")
            if i == len(colls) - 1:
                ax.set_xlabel("message size")
                for lbl in ax.get_xticklabels():
                    lbl.set_rotation(45)
    handles, labels = [], []
    for ax in axes.flat:  # one legend for the figure, from the first panel that has each line
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    top = 1.0 - 0.55 / fig.get_figheight()  # room for the title and the legend (in inches)
    fig.tight_layout(rect=(0, 0, 1, top))
    fig.suptitle(title, fontsize=10, y=1.0 - 0.05 / fig.get_figheight(), va="top")
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 1.0 - 0.22 / fig.get_figheight()))
    fig.savefig(png, dpi=72, pil_kwargs={"optimize": True})
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description="weft vs Open MPI vs gloo on this machine (host memory).")
    ap.add_argument("--quick", action="store_true", help="3 sizes, 5 iterations: a smoke run")
    ap.add_argument("--ranks", default="2 4", help='rank counts, e.g. "2 4" (default)')
    ap.add_argument("--collectives", default=" ".join(DEFAULT_COLLS),
                    help=f"space- or comma-separated, from {' '.join(ALL_COLLS)} (default: the first five)")
    ap.add_argument("--libraries", default=" ".join(LIBS), help="subset of: weft openmpi gloo")
    ap.add_argument("--no-check", action="store_true", help="skip the result checks of all three")
    ap.add_argument("--out", help="results folder (default bench/results; with --quick BUILD/bench/results-quick)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="weft build folder")
    a = ap.parse_args()

    colls = [c for c in a.collectives.replace(",", " ").split() if c]
    bad = [c for c in colls if c not in ALL_COLLS]
    if bad or not colls:
        ap.error(f"unknown collective(s) {bad}; choose from {ALL_COLLS}")
    ranks = [int(x) for x in a.ranks.replace(",", " ").split()]
    if not ranks or min(ranks) < 1:
        ap.error("--ranks needs positive rank counts")
    libs = [l for l in a.libraries.replace(",", " ").split() if l]
    if any(l not in LIBS for l in libs):
        ap.error(f"--libraries: choose from {LIBS}")
    build = os.path.abspath(a.build)
    out = os.path.abspath(a.out or (os.path.join(build, "bench", "results-quick") if a.quick
                                    else os.path.join(ROOT, "bench", "results")))
    os.makedirs(out, exist_ok=True)
    work = os.path.join(build, "bench", "runs")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    bands = QUICK_BANDS if a.quick else FULL_BANDS
    check = 0 if a.no_check else 1

    env = dict(os.environ)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo over loopback, like the others

    started = datetime.datetime.now()
    t_start = time.time()
    load_before = loadavg()
    log_path = os.path.join(work, "compare-host.log")
    rows, failures, others = [], [], []
    print(f"compare-host: {', '.join(colls)}; ranks {' '.join(map(str, ranks))}; "
          f"{'quick' if a.quick else 'full'} run; raw output in {log_path}", flush=True)
    with open(log_path, "w") as log:
        for n in ranks:
            for bi, band in enumerate(bands):
                for lib in libs:  # interleaved, so load changes hit every library alike
                    path = os.path.join(work, f"{lib}-n{n}-band{bi}.csv")
                    cmd = commands(lib, n, band, colls, check, build, path)
                    other = others_running()
                    if other is not None:
                        others.append(other)
                    t0 = time.time()
                    ok = run(cmd, env, log, timeout=900)
                    got = read_rows(path)
                    rows += got
                    print(f"  {lib:8s} {n} ranks {band[0]:>5}..{band[1]:<4} x{band[3]:<3} "
                          f"{time.time() - t0:6.1f} s  {'ok' if ok else 'FAILED'}"
                          f"  (other runnable tasks before: {other if other is not None else '?'})", flush=True)
                    if not ok:
                        failures.append(f"{lib} {n} ranks {band[0]}..{band[1]} (see {log_path})")
    elapsed = time.time() - t_start
    load_after = loadavg()

    wrong = [r for r in rows if r["wrong"] > 0]
    for r in wrong:
        failures.append(f"{r['library']} {r['collective']} {r['nranks']} ranks {r['bytes']} B: {r['wrong']} wrong")

    stem = "compare-host-quick" if a.quick else "compare-host"
    csv_path, txt_path, png_path = (os.path.join(out, stem + ext) for ext in (".csv", ".txt", ".png"))
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.3f}" if k == "time_us" else f"{r[k]:.6f}" if k in ("algbw", "busbw") else r[k])
                        for k in FIELDS})

    try:
        torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                                       capture_output=True, text=True, timeout=120).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        torch_version = "?"
    try:
        ompi_version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                                      timeout=60).stdout.splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        ompi_version = "?"
    git = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip()
    ucx = {k: v for k, v in os.environ.items() if k.startswith(("UCX_", "WEFT_"))}
    header = [
        f"# compare-host {'(quick) ' if a.quick else ''}{started:%Y-%m-%d %H:%M}, {elapsed:.0f} s; "
        f"weft at {git}",
        f"# host: {platform.node()}, {os.cpu_count()} CPUs ({cpu_model()}); "
        f"load average {load_before} before, {load_after} after; other runnable tasks between runs: "
        f"{(f'mean {sum(others) / len(others):.1f}, max {max(others):.1f}') if others else '?'}",
        f"# weft: weft-bench, default transport (UCX; env {ucx or 'unset'})",
        f"# Open MPI: {ompi_version}; {' '.join(MPIRUN[1:])} (shared memory: ob1 + vader btl)",
        f"# gloo: torch {torch_version}, /usr/bin/python3, launched by weftrun, GLOO_SOCKET_IFNAME={env['GLOO_SOCKET_IFNAME']}",
        "# float32 sum; per size: W warmup iterations, barrier, N timed iterations, time = slowest rank's average;",
        "# bands (sizes: N timed / W warmup, same for all libraries): " +
        "; ".join(f"{b[0]}..{b[1]} x{b[2]}: {b[3]}/{b[4]}" for b in bands),
        "# busbw factors (nccl-tests): allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; "
        "broadcast, reduce, sendrecv 1",
        "# all numbers come from this one run; '!' marks a row whose check found wrong elements",
    ]
    busy = busy_warning(load_before, others)
    if busy:
        header.append("# " + busy)
    text = "\n".join(header) + "\n" + tables(rows, colls, ranks) + "\n"
    if failures:
        text += "\nFAILURES:\n" + "\n".join("  " + f for f in failures) + "\n"
    with open(txt_path, "w") as f:
        f.write(text)
    print(text)

    try:
        plot(rows, colls, ranks, png_path,
             f"busbw vs size, host memory, {platform.node()} ({os.cpu_count()} CPUs), {started:%Y-%m-%d}: "
             f"weft vs Open MPI vs gloo (float32 sum, same run)")
    except Exception as e:  # the tables and CSV are still useful without the picture
        print(f"compare-host: plotting failed: {e}", file=sys.stderr)
        failures.append("plot")
    print(f"compare-host: wrote {csv_path}, {txt_path}, {png_path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
