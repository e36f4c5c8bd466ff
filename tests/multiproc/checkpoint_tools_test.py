#!/usr/bin/env python3
"""weft-ckpt on a real checkpoint, read back by an independent reader.

1. weftrun -n 3 weft_mp_checkpoint_kill --save A DIR  (the tensors of test_checkpoint_kill.cpp)
2. weft-ckpt info DIR, verify DIR, export --safetensors OUT DIR
3. OUT parsed here with json + numpy alone (8-byte little-endian header length, JSON header
   padded with spaces to 8 bytes, data_offsets covering the data exactly, in order) and every
   tensor compared with the values generated from its indices (checkpoint_util.h's formula)
4. one flipped byte in a data file: weft-ckpt verify exits 1 naming the file and the tensor,
   and the export refuses too

Exit 77 (skip) when numpy is missing.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("checkpoint_tools_test: numpy is not installed for", sys.executable, "- skipped")
    sys.exit(77)

NRANKS = 3
# name -> (safetensors dtype, numpy dtype, shape, position in test_checkpoint_kill.cpp's list)
TENSORS = {
    "layer.w": ("F32", "<f4", (9, 4), 0),
    "layer.b": ("BF16", "<u2", (4,), 1),  # numpy has no bfloat16: compared as raw 16-bit words
    "emb": ("U8", "u1", (5, 2), 2),
    "grad": ("F32", "<f4", (4, 3), 3),  # saved as PARTIAL(sum) terms: stored as their sum
    "big": ("F32", "<f4", (3, 400000), 4),
    "step": ("I64", "<i8", (), 5),
}
failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures += 1


def expected_bytes(position, np_dtype, shape):
    seed = 100 + position  # checkpoint A
    esize = np.dtype(np_dtype).itemsize
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    lin = np.arange(n, dtype=np.int64)[:, None]
    k = np.arange(esize, dtype=np.int64)[None, :]
    return ((lin * 131 + k * 29 + seed * 7 + 13) % 251).astype(np.uint8).reshape(-1)


def expected_grad(shape):
    lin = np.arange(int(np.prod(shape)), dtype=np.int64)
    return (NRANKS * (lin % 5) + NRANKS * (NRANKS - 1) // 2).astype(np.float32).reshape(shape)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    check(hlen % 8 == 0, f"header length {hlen} is a multiple of 8")
    raw = blob[8 : 8 + hlen]
    check(raw.rstrip(b" ").endswith(b"}"), "the JSON header is padded with spaces only")
    header = json.loads(raw.decode("utf-8"))
    data = blob[8 + hlen :]
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__")
    at = 0
    for b, e in spans:
        check(b == at, f"data_offsets continue at {at} (got {b})")
        at = e
    check(at == len(data), f"data_offsets cover the {len(data)} data bytes exactly")
    return header, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weftrun", required=True)
    ap.add_argument("--maker", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    ck = os.path.join(a.dir, "ckpt")
    out = os.path.join(a.dir, "model.safetensors")

    r = subprocess.run([a.weftrun, "--timeout", "120", "-n", str(NRANKS), a.maker, "--save", "A", ck])
    check(r.returncode == 0, "save A on 3 ranks")
    r = subprocess.run([a.ckpt, "info", ck], capture_output=True, text=True)
    print(r.stdout, end="")
    check(r.returncode == 0 and all(name in r.stdout for name in TENSORS), "weft-ckpt info lists every tensor")
    r = subprocess.run([a.ckpt, "verify", ck], capture_output=True, text=True)
    check(r.returncode == 0 and "OK" in r.stdout, "weft-ckpt verify: " + (r.stdout + r.stderr).strip())
    r = subprocess.run([a.ckpt, "export", "--safetensors", out, ck], capture_output=True, text=True)
    check(r.returncode == 0, "weft-ckpt export --safetensors: " + (r.stdout + r.stderr).strip())

    header, data = read_safetensors(out)
    check(set(header) - {"__metadata__"} == set(TENSORS), "the header names exactly the saved tensors")
    for name, (st_dtype, np_dtype, shape, pos) in TENSORS.items():
        h = header.get(name, {})
        check(h.get("dtype") == st_dtype and tuple(h.get("shape", [-1])) == shape, f"{name}: {st_dtype} {list(shape)}")
        b, e = h.get("data_offsets", [0, 0])
        arr = np.frombuffer(data[b:e], dtype=np_dtype).reshape(shape)
        if name == "grad":
            ok = np.array_equal(arr, expected_grad(shape))
        else:
            ok = np.array_equal(arr.reshape(-1).view(np.uint8), expected_bytes(pos, np_dtype, shape))
        check(ok, f"{name}: every value equals the one generated from its index")

    # One injected corruption: a byte in the middle of a data file.
    victim = sorted(f for f in os.listdir(ck) if f.startswith("data-"))[0]
    path = os.path.join(ck, victim)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x10]))
    r = subprocess.run([a.ckpt, "verify", ck], capture_output=True, text=True)
    msg = (r.stdout + r.stderr).strip()
    named = victim in msg and any(f"'{n}'" in msg for n in TENSORS)
    check(r.returncode == 1 and "checksum mismatch" in msg and named,
          "injected corruption caught by weft-ckpt verify (exit %d): %s" % (r.returncode, msg))
    r = subprocess.run([a.ckpt, "export", "--safetensors", out + ".2", ck], capture_output=True, text=True)
    check(r.returncode == 1 and victim in r.stderr, "the export refuses the corrupt checkpoint too")
    if not failures:
        shutil.rmtree(a.dir, ignore_errors=True)
    print("checkpoint_tools_test: PASSED" if not failures else f"checkpoint_tools_test: {failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
