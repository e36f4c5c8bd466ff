#!/usr/bin/python3
"""Compares weft's expert-parallel dispatch and combine (weft-bench moe) with a Megatron-style
all-to-all dispatcher over torch.distributed's gloo backend (bench/moe_peer.py), and weft's
router with the same routing in torch ops, on this machine in one run. Called by
bench/compare-moe, which builds what this needs; run that rather than this file.

For each rank count: weft-bench moe runs every case and writes each rank's routing; then the
peer runs the same cases on those very routing files. Both report the same DeepEP byte counts
(taken from the routing), the slowest rank's median time of each call, and a check of
combine(dispatch(x)) == x; the table shows the ratio weft / peer of the dispatch + combine
throughput per case against issue 14's goal (>= 3x). Then the router: tokens/s of
weft_router_forward against torch's softmax + topk + renormalisation on the same logits.
Writes the text (and the CSVs) under --out (default bench/results): moe.txt, moe-*.csv.
"""
import argparse
import csv
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL = 3.0  # issue 14: weft >= 3x the peer's dispatch + combine throughput


def commit():
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        untracked = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                                   check=True).stdout.strip()
        return head + ("+wt" if dirty or untracked else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(cmd, log):
    log.append("$ " + " ".join(cmd))
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log.append(p.stdout.rstrip())
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"compare-moe: {' '.join(cmd[:6])} ... exited with status {p.returncode}")
    return p.stdout


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def median_rows(runs):
    """Per case, the median over repeats of each time (and the throughputs recomputed from them);
    #wrong is the sum over repeats."""
    out = {}
    for key, first in runs[0].items():
        rows = [r[key] for r in runs if key in r]
        m = dict(first)
        for f in ("dispatch_us", "combine_us"):
            m[f] = statistics.median(float(r[f]) for r in rows)
        total_bytes = float(first["dispatch_bytes"]) + float(first["combine_bytes"])
        m["total_gbps"] = total_bytes / ((m["dispatch_us"] + m["combine_us"]) * 1e3)
        m["wrong"] = sum(int(r["wrong"]) for r in rows)
        out[key] = m
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.environ.get("WEFT_BUILD_DIR", "build"))
    ap.add_argument("--quick", action="store_true", help="tokens 128,512, hidden 1024, 3 iterations")
    ap.add_argument("--ranks", default="2 4")
    ap.add_argument("--tokens", help="comma list (default 128,512,2048,8192)")
    ap.add_argument("--hidden", help="comma list (default 1024,4096,7168)")
    ap.add_argument("--dtype", default="float32,bf16")
    ap.add_argument("-n", "--iters", type=int)
    ap.add_argument("-w", "--warmup", type=int)
    ap.add_argument("--repeat", type=int, default=1, help="run weft and the peer this many times; median times")
    ap.add_argument("--max-mib", type=int, default=1024, help="skip cases with more received rows per rank")
    ap.add_argument("--router-tokens", default=None, help="comma list (default 512,2048,8192,32768)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()

    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    weftrun = os.path.join(build, "bin", "weftrun")
    bench = os.path.join(build, "bin", "weft-bench")
    lib = os.path.join(build, "lib", "libweft.so")
    common = ["--dtype", a.dtype, "--max-mib", str(a.max_mib)]
    if a.quick:
        common.append("--quick")
    for flag, v in (("--tokens", a.tokens), ("--hidden", a.hidden), ("-n", a.iters), ("-w", a.warmup)):
        if v is not None:
            common += [flag, str(v)]
    os.makedirs(a.out, exist_ok=True)
    log = []
    load = os.getloadavg()
    head = [f"# compare-moe: weft-bench moe vs bench/moe_peer.py (Megatron-style all-to-all, torch gloo)",
            f"# date {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, commit {commit()}, host {platform.node()}, "
            f"{os.cpu_count()} cores, load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
            f"# options: {' '.join(common)}, repeats {a.repeat} (median time per case over them)",
            "# throughput = (dispatch + combine bytes, DeepEP's counts per rank) / (dispatch + combine time,",
            "#   slowest rank's median); ratio = weft / peer (the same bytes, so the inverse ratio of times);",
            f"#   goal (issue 14): ratio >= {GOAL:g}"]
    lines = list(head)
    any_wrong = False
    ratios_all = []
    for n in [int(v) for v in a.ranks.split()]:
        weft_runs, peer_runs = [], []
        for rep in range(a.repeat):  # weft then peer, back to back, a.repeat times
            with tempfile.TemporaryDirectory(prefix="weft-moe-routing-") as rdir:
                wcsv = os.path.join(a.out, f"moe-weft-n{n}-r{rep}.csv")
                pcsv = os.path.join(a.out, f"moe-peer-n{n}-r{rep}.csv")
                wout = run([weftrun, "--timeout", "3000", "-n", str(n), bench, "moe", "--routing-dir", rdir, "--csv",
                            wcsv] + common, log)
                run([weftrun, "--timeout", "3000", "-n", str(n), sys.executable,
                     os.path.join(ROOT, "bench", "moe_peer.py"), "--routing-dir", rdir, "--csv", pcsv] + common, log)
            weft_runs.append({(r["dtype"], r["hidden"], r["routing"], r["tokens"]): r for r in read_csv(wcsv)})
            peer_runs.append({(r["dtype"], r["hidden"], r["routing"], r["tokens"]): r for r in read_csv(pcsv)})
        weft, peer = median_rows(weft_runs), median_rows(peer_runs)
        lines += ["#", f"# {n} ranks",
                  f"#{'type':>8} {'hidden':>6} {'routing':>10} {'tokens':>6} | {'weft disp':>9} {'comb(us)':>9} "
                  f"{'GB/s':>7} | {'peer disp':>9} {'comb(us)':>9} {'GB/s':>7} | {'ratio':>6} {'goal':>4}"]
        ratios = []
        for key, w in weft.items():
            p = peer.get(key)
            if p is None:
                continue
            any_wrong = any_wrong or int(w["wrong"]) != 0 or int(p["wrong"]) != 0
            ratio = float(w["total_gbps"]) / float(p["total_gbps"])
            ratios.append(ratio)
            lines.append(f" {key[0]:>8} {key[1]:>6} {key[2]:>10} {key[3]:>6} | {float(w['dispatch_us']):9.1f} "
                         f"{float(w['combine_us']):9.1f} {float(w['total_gbps']):7.3f} | {float(p['dispatch_us']):9.1f} "
                         f"{float(p['combine_us']):9.1f} {float(p['total_gbps']):7.3f} | {ratio:6.2f} "
                         f"{'ok' if ratio >= GOAL else 'MISS':>4}")
        skipped = [" ".join(ln.split()[1:5]) for ln in wout.splitlines() if "skipped" in ln]
        if skipped:
            lines.append(f"# skipped on both sides (received rows > --max-mib {a.max_mib} MiB per rank): "
                         + "; ".join(skipped))
        if ratios:
            lines.append(f"# {n} ranks: ratio median {statistics.median(ratios):.2f}, min {min(ratios):.2f}, "
                         f"max {max(ratios):.2f}; {sum(r >= GOAL for r in ratios)} of {len(ratios)} cases >= {GOAL:g}")
        ratios_all += ratios
    rcsv = os.path.join(a.out, "moe-router.csv")
    rtok = a.router_tokens or ("512,2048" if a.quick else "512,2048,8192,32768")
    lines += ["#", "# router (one process; ratio = torch time / weft time = weft tokens/s over torch's)"]
    try:
        out = run([sys.executable, os.path.join(ROOT, "bench", "moe_peer.py"), "router", "--lib", lib, "--tokens",
                   rtok, "--csv", rcsv] + (["--quick"] if a.quick else []), log)
        lines += [ln for ln in out.splitlines() if ln.strip()]
        any_wrong = any_wrong or any(int(r["wrong"]) for r in read_csv(rcsv))
    except SystemExit as e:  # the dispatch tables above still stand; the failure is reported
        lines.append(f"# router FAILED: {e}")
        any_wrong = True
    load = os.getloadavg()
    lines.append(f"# load average after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if any_wrong:
        lines.append("# a check FAILED (see #wrong in the raw output below)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(os.path.join(a.out, "moe.txt"), "w") as f:
        f.write(text + "\n# raw output\n" + "\n".join(log) + "\n")
    return 1 if any_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
