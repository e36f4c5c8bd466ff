#!/usr/bin/env python3
"""weft-schedule from the command line: exit codes and key output, against closed forms and
hand-written schedules (no weft code computes an expected value).

1. show: 1F1B and GPipe makespan (m + p - 1)(F + B), bubble (p - 1)/(m + p - 1), 1F1B peak
   activations p - r, GPipe's m; interleaved bubble (p - 1)/(v m + p - 1); the SVG parsed by
   xml.etree with one box per compute action; the Chrome trace parsed by json with one "X" event
   per compute action; the CSV of 1F1B p=2 m=2 against the order written by hand.
2. validate / convert / simulate: CSV -> FlatBuffers -> compute-only CSV round trip; a broken CSV
   (a backward missing) refused with the validator's message and exit 1; a bad cell refused.
3. tune: p=2, 4 layers of F=1, B=2 per sample, batch 8, overhead 1 per action: a stage holds
   2 layers, so F + B of a micro-batch of 8/m samples is 2 * 3 * 8/m + 2 and the step time of
   GPipe and 1F1B (m + 1)(48/m + 2): m = 1, 2, 4, 8 give 100, 78, 70, 72, the best m = 4 (interior).
   With 1 MiB of activations per sample and layer and a 1 MiB cap nothing fits: exit 1.
4. usage errors exit 2; a generator rule broken exits 1 naming it.

WEFT_TEST_INJECT=1 (ctest tools.weft_schedule_inject) corrupts the expected value of every check
(an exit code + 1, a number + 0.5, a text made unmatchable); the run passes only when every
corrupted check failed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

INJECT = os.environ.get("WEFT_TEST_INJECT") == "1"
failures = 0
injected = 0
caught = 0


def corrupt(want):
    if isinstance(want, bool):
        return not want
    if isinstance(want, int):
        return want + 1
    if isinstance(want, float):
        return want + 0.5
    if isinstance(want, str):
        return want + "\u2603"
    if isinstance(want, list):
        return want[:-1] + [corrupt(want[-1])] if want else ["\u2603"]
    raise TypeError(type(want))


def check(what, ok, want):
    """ok(want) -> bool; with injection on, want is corrupted and the check must fail."""
    global failures, injected, caught
    if INJECT:
        injected += 1
        if ok(corrupt(want)):
            print("FAIL injected " + what + ": a corrupted expectation passed", flush=True)
            failures += 1
        else:
            caught += 1
        return
    good = ok(want)
    print(("ok   " if good else "FAIL ") + what + ("" if good else " (want " + repr(want) + ")"), flush=True)
    if not good:
        failures += 1


def equal(what, got, want, tol=None):
    if tol is None:
        check(what + " = " + repr(got), lambda w: got == w, want)
    else:
        check(what + " = " + repr(got), lambda w: got is not None and abs(got - w) <= tol, want)


def contains(what, text, want):
    check(what + " contains " + repr(want), lambda w: w in text, want)


class Tool:
    def __init__(self, path, workdir):
        self.path = path
        self.dir = workdir

    def run(self, *args):
        p = subprocess.run([self.path] + list(args), cwd=self.dir, capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def file(self, name):
        return os.path.join(self.dir, name)


def number_after(text, label):
    m = re.search(r"^" + re.escape(label) + r" ([-+0-9.eE]+)", text, re.M)
    return float(m.group(1)) if m else None


def rank_rows(text):
    """The per-rank table of show/simulate: rank -> (busy, idle, peak activations)."""
    rows = {}
    for m in re.finditer(r"^(\d+)\s+([-+0-9.eE]+)\s+([-+0-9.eE]+)\s+(\d+)\s*$", text, re.M):
        rows[int(m.group(1))] = (float(m.group(2)), float(m.group(3)), int(m.group(4)))
    return rows


def svg_boxes(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    ns = "{http://www.w3.org/2000/svg}"
    return [r for r in root.iter(ns + "rect") if r.get("class") == "act"]


def show_closed_forms(tool):
    # 1F1B, p=4, m=8, F=1, B=2.
    rc, out, err = tool.run("show", "1f1b", "-p", "4", "-m", "8")
    equal("show 1f1b exit", rc, 0)
    contains("show 1f1b", out, "valid")
    contains("show 1f1b rank 0's list", out, "rank 0 (")
    equal("1f1b makespan", number_after(out, "makespan"), 33.0, 1e-9)
    equal("1f1b bubble %", number_after(out, "bubble"), 100.0 * 3 / 11, 0.006)
    rows = rank_rows(out)
    equal("1f1b rank 0 busy, idle", list(rows.get(0, (None, None, None))[:2]), [24.0, 9.0])
    equal("1f1b peak activations by rank", [rows[r][2] if r in rows else None for r in range(4)], [4, 3, 2, 1])

    rc, out, err = tool.run("show", "gpipe", "-p", "3", "-m", "4")
    equal("show gpipe exit", rc, 0)
    equal("gpipe makespan", number_after(out, "makespan"), 18.0, 1e-9)
    rows = rank_rows(out)
    equal("gpipe peak activations by rank", [rows[r][2] if r in rows else None for r in range(3)], [4, 4, 4])

    rc, out, err = tool.run("show", "interleaved", "-p", "2", "-m", "4", "-v", "2", "--costs", "1,2")
    equal("show interleaved exit", rc, 0)
    equal("interleaved bubble %", number_after(out, "bubble"), 100.0 / 9, 0.006)
    equal("interleaved makespan", number_after(out, "makespan"), 27.0, 1e-9)


def show_pictures(tool):
    svg, trace = tool.file("zbv.svg"), tool.file("zbv.json")
    rc, out, err = tool.run("show", "zbv", "-p", "4", "-m", "8", "--svg", svg, "--trace", trace)
    equal("show zbv exit", rc, 0)
    contains("show zbv", out, "wrote " + svg)
    # ZB-V: each rank holds 2 stages and runs F, I and W of each micro-batch on each: 2 * 8 * 3.
    equal("zbv SVG boxes", len(svg_boxes(svg)), 4 * 2 * 8 * 3)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    equal("zbv trace X events", len(xs), 4 * 2 * 8 * 3)
    equal("zbv trace tids", sorted({e["tid"] for e in xs}), [0, 1, 2, 3])
    names = sorted(e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name")
    equal("zbv trace thread names", names, ["rank 0", "rank 1", "rank 2", "rank 3"])

    svg2 = tool.file("rg.svg")
    rc, out, err = tool.run("show", "1f1b", "-p", "2", "-m", "2", "--reduce-grad", "--svg", svg2)
    equal("show --reduce-grad exit", rc, 0)
    contains("show --reduce-grad", out, "REDUCE_GRAD")
    equal("1f1b + REDUCE_GRAD SVG boxes", len(svg_boxes(svg2)), 2 * 2 * 2 + 2)


def files(tool):
    csv, wsched, back = tool.file("a.csv"), tool.file("a.wsched"), tool.file("back.csv")
    rc, out, err = tool.run("show", "1f1b", "-p", "2", "-m", "2", "--csv", csv)
    equal("show --csv exit", rc, 0)
    rc, out, err = tool.run("validate", csv)
    equal("validate CSV exit", rc, 0)
    contains("validate CSV", out, "valid")
    rc, out, err = tool.run("convert", csv, wsched)
    equal("convert CSV -> FlatBuffers exit", rc, 0)
    rc, out, err = tool.run("validate", wsched)
    equal("validate FlatBuffers exit", rc, 0)
    rc, out, err = tool.run("convert", wsched, back, "--compute-only")
    equal("convert FlatBuffers -> compute-only CSV exit", rc, 0)
    with open(back, newline="") as f:
        text = f.read()
    # 1F1B, p=2, m=2 by hand: rank 0 warms up with min(p - 1 - r, m) = 1 forward; rank 1 with 0.
    equal("compute-only CSV", text, "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n")
    rc, out, err = tool.run("simulate", wsched, "--costs", "1,2,1,1")
    equal("simulate exit", rc, 0)
    equal("simulate makespan", number_after(out, "makespan"), 9.0, 1e-9)
    rc, out, err = tool.run("convert", wsched, tool.file("x.wsched2"), "--compute-only")
    equal("convert --compute-only to FlatBuffers exit (usage)", rc, 2)

    broken = tool.file("broken.csv")
    with open(broken, "w", newline="") as f:
        f.write("0F0,0B0\r\n1F0\r\n")  # stage 1's backward of micro-batch 0 is missing
    rc, out, err = tool.run("validate", broken)
    equal("validate broken CSV exit", rc, 1)
    contains("validate broken CSV stderr", err, "rule 'complete'")
    contains("validate broken CSV stderr", err, "(1F0)")
    rc, out, err = tool.run("simulate", broken)
    equal("simulate broken CSV exit", rc, 1)

    bad = tool.file("bad.csv")
    with open(bad, "w", newline="") as f:
        f.write("0F0,0X0\r\n")
    rc, out, err = tool.run("validate", bad)
    equal("validate bad cell exit", rc, 1)
    contains("validate bad cell stderr", err, "0X0")
    rc, out, err = tool.run("validate", tool.file("missing.csv"))
    equal("validate missing file exit", rc, 1)
    contains("validate missing file stderr", err, "No such file")


def tune(tool):
    base = ["tune", "-p", "2", "--layers", "4", "--layer-fwd", "1", "--layer-bwd", "2", "--batch", "8",
            "--overhead", "1", "--kinds", "1f1b,gpipe"]
    rc, out, err = tool.run(*base)
    equal("tune exit", rc, 0)
    rows = re.findall(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([-+0-9.eE]+)\s+([-+0-9.]+)\s+([-+0-9.]+)\s+(yes|no)\s*$",
                      out, re.M)
    equal("tune candidates", len(rows), 8)
    by = {(r[0], int(r[1])): float(r[4]) for r in rows}
    for kind in ("1f1b", "gpipe"):
        equal("tune " + kind + " step times m = 1, 2, 4, 8", [by.get((kind, m)) for m in (1, 2, 4, 8)],
              [100.0, 78.0, 70.0, 72.0])
    equal("tune micro-batch sizes (m:size)", sorted({"%s:%s" % (r[1], r[3]) for r in rows}), ["1:8", "2:4", "4:2", "8:1"])
    steps = [float(r[4]) for r in rows]
    equal("tune table sorted by step time", steps == sorted(steps), True)
    m = re.search(r"^best: (\w+) m=(\d+) v=(\d+) micro-batch size (\d+) step time ([-+0-9.eE]+)", out, re.M)
    equal("tune best (m, size, step time)", [int(m.group(2)), int(m.group(4)), float(m.group(5))] if m else None,
          [4, 2, 70.0])

    rc, out, err = tool.run(*base, "--act-bytes", "1M", "--mem-cap", "1M")
    equal("tune nothing fits exit", rc, 1)
    contains("tune nothing fits stderr", err, "no candidate fits")
    rc, out, err = tool.run("tune", "-p", "2", "--layers", "4", "--layer-fwd", "1", "--layer-bwd", "2",
                            "--batch", "8", "--kinds", "bogus")
    equal("tune unknown kind exit", rc, 2)


def usage(tool):
    for args, want in ((), 2), (("frobnicate",), 2), (("show", "nosuch", "-p", "2", "-m", "2"), 2), \
                      (("show", "1f1b", "-p", "2"), 2), (("show", "1f1b", "-p", "2", "-m", "2", "--bogus"), 2), \
                      (("show", "1f1b", "-p", "0", "-m", "2"), 2), (("validate",), 2), (("--help",), 0):
        rc, out, err = tool.run(*args)
        equal("weft-schedule " + " ".join(args) + " exit", rc, want)
    rc, out, err = tool.run("show", "1f1b", "-p", "2", "-m", "2", "--costs", "1")
    equal("show --costs 1 exit", rc, 2)
    equal("show --costs 1 refused before any output", out, "")
    contains("show --costs 1 stderr", err, "--costs takes F,B or F,B,I,W")
    rc, out, err = tool.run("show", "nosuch", "-p", "2", "-m", "2")
    contains("unknown method stderr", err, "unknown method 'nosuch'")
    contains("usage text", err, "usage: weft-schedule show METHOD")
    # Generator rules: interleaved needs m a multiple of p (or m <= p); DualPipeV needs m >= 2p.
    rc, out, err = tool.run("show", "interleaved", "-p", "4", "-m", "6", "-v", "2")
    equal("interleaved m=6 p=4 exit", rc, 1)
    contains("interleaved m=6 p=4 stderr", err, "multiple")
    rc, out, err = tool.run("show", "dualpipev", "-p", "4", "-m", "4")
    equal("dualpipev m=4 p=4 exit", rc, 1)
    contains("dualpipev m=4 p=4 stderr", err, "2p")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    tool = Tool(os.path.abspath(a.tool), os.path.abspath(a.dir))
    for part in (show_closed_forms, show_pictures, files, tune, usage):
        try:
            part(tool)
        except Exception as e:  # a crash in one part is a failure, the others still run
            global failures
            failures += 1
            print("FAIL " + part.__name__ + ": " + type(e).__name__ + ": " + str(e), flush=True)
    if INJECT:
        print("injection: %d cases, %d caught" % (injected, caught))
        if injected == 0 or caught != injected:
            failures += 1
    print("weft-schedule test: " + ("FAILED, %d failures" % failures if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
