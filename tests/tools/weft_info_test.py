#!/usr/bin/env python3
"""weft-info from the command line: exit codes and key output for weft itself, the good fixture
plugin (tests/plugins/manifests/test_good.json, whose entries are written out again here) and
every bad fixture plugin (exit 1 with the refusal on stderr), and usage errors (exit 2).

WEFT_TEST_INJECT=1 (ctest tools.weft_info_inject) corrupts the expectation of every check (an
exit code + 1, a text made unmatchable); the run passes only when every corrupted check failed.
"""
import argparse
import os
import subprocess
import sys

INJECT = os.environ.get("WEFT_TEST_INJECT") == "1"
failures = injected = caught = 0


def corrupt(want):
    if isinstance(want, bool):
        return not want
    return want + 1 if isinstance(want, int) else want + "\u2603"


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
    if not ok(want):
        print("FAIL " + what + ": expected " + repr(want), flush=True)
        failures += 1


def run(tool, *args):
    p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


# The good plugin's entries as weft-info must print them: kind, name, signature.
GOOD = [
    ("FUNCTION", "I64 add_i64(I64, I64)"),
    ("FUNCTION", "F64 mix3(I32, I64, F64)"),
    ("FUNCTION", "U64 not_u64(U64)"),
    ("FUNCTION", "SIZE str_len(STRING)"),
    ("FUNCTION", "I64 tensor_numel(TENSOR)"),
    ("FUNCTION", "F64 mix_all(I8, U8, I16, U16, I32, U32, I64, U64, F32, F64, SIZE)"),
    ("FUNCTION", "I32 apply_i32(FN, I32)"),
    ("FUNCTION", "VOID set_flag(PTR)"),
    ("REDUCE_OP", "I32 absmax(PTR, PTR, PTR, SIZE, I32)"),
    ("CODEC_BYTES", "SIZE trunc16.bytes(SIZE)"),
    ("CODEC_ENCODE", "I32 trunc16.encode(PTR, SIZE, PTR)"),
    ("CODEC_DECODE", "I32 trunc16.decode(PTR, SIZE, PTR)"),
    ("ROUTER", "I32 highest(PTR, SIZE, I32, I32, PTR)"),
    ("SCHEDULE", "I32 gpipe_like(I32, I32, I32, PTR, SIZE, PTR, PTR)"),
    ("COST_MODEL", "F64 linear(I32, I32, I32, I32, I32)"),
]

# Each bad plugin: a phrase its refusal must contain.
BAD = {
    "bad_abi2": "built for plugin ABI 2.0, this weft has 1.0",
    "bad_lying_kind": "a REDUCE_OP entry's signature must be I32(PTR, PTR, PTR, SIZE, I32)",
    "bad_missing_symbol": "symbol 'tp_not_defined_anywhere' is not exported",
    "bad_data_symbol": "is ELF type OBJECT (a data object), not a function",
    "bad_duplicate": "duplicate entry name 'twice'",
    "bad_unknown_kind": "unknown kind 9",
    "bad_truncate": "fails the FlatBuffers verifier",
    "bad_identifier": "file identifier is \"XXXX\"; expected \"WFPM\"",
    "no_manifest": "does not export weft_plugin_manifest()",
}


def main():
    global failures
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--plugin", action="append", default=[], help="name=path of a fixture plugin")
    a = ap.parse_args()
    plugins = dict(p.split("=", 1) for p in a.plugin)

    rc, out, _ = run(a.tool)
    check("weft-info exit", lambda w: rc == w, 0)
    check("weft-info plugin ABI", lambda w: w in out, "plugin ABI: 1.0 (extension ids from 64)")
    check("weft-info build line", lambda w: w in out, "build: UCX yes, CUDA ")

    rc, out, err = run(a.tool, "--plugin", plugins["good"])
    check("--plugin good exit", lambda w: rc == w, 0)
    check("--plugin good header", lambda w: w in out, "plugin weft_test_good 1.2.3 test")
    check("--plugin good entries", lambda w: w in out, "entries: 27")
    for kind, sig in GOOD:
        name = sig.split(" ")[1].split("(")[0]
        check("entry " + name + " kind", lambda w: (w + " " + name) in out, kind)
        check("entry " + name + " signature", lambda w: ("signature: " + w) in out, sig)
    check("absmax dtypes", lambda w: w in out, "dtypes: FLOAT32, INT32")
    check("absmax doc", lambda w: w in out, "doc: max(|a|, |b|)")
    # A fresh process: the good plugin's kinds are the first of each table, id 64 each.
    check("absmax id", lambda w: w in out.split("REDUCE_OP absmax")[1].split("[21]")[0], "id: 64")
    check("FUNCTION entries have no id", lambda w: ("id:" in out.split("FUNCTION add_i64")[1].split("[1]")[0]) == w, False)

    for name, phrase in BAD.items():
        rc, out, err = run(a.tool, "--plugin", plugins[name])
        check("--plugin " + name + " exit", lambda w: rc == w, 1)
        check("--plugin " + name + " message", lambda w: w in err, phrase)
        check("--plugin " + name + " names the file", lambda w: w in err, plugins[name])

    for args in (["--plugin"], ["--bogus"], ["--plugin", "a", "--plugin", "b"]):
        rc, _, err = run(a.tool, *args)
        check("usage " + " ".join(args) + " exit", lambda w: rc == w, 2)
        check("usage " + " ".join(args) + " text", lambda w: w in err, "usage: weft-info")

    if INJECT:
        print("injection: %d cases, %d caught" % (injected, caught))
        if injected == 0 or caught != injected:
            failures += 1
    print("weft_info_test: %s" % ("FAILED" if failures else "OK"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
