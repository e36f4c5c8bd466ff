"""Reference data and reductions for the binding's tests (plain numpy, one process).

Every rank can compute every rank's input (inputs depend only on (rank, case, size, op)), so
each rank checks its own result against a numpy reduction of all inputs.
"""

import os

import numpy as np

import weft


def under_launcher():
    return bool(os.environ.get("WEFT_RANK")) and bool(os.environ.get("WEFT_WORLD_SIZE"))

# ----------------------------------------------------------------- fp8 / bf16 in numpy


def _fp8_decode_table(exp_bits, man_bits, bias, e4m3):
    vals = np.empty(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b >> 7 else 1.0
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        m = b & ((1 << man_bits) - 1)
        if e4m3 and e == 15 and m == 7:
            vals[b] = np.nan
        elif not e4m3 and e == 31:
            vals[b] = s * np.inf if m == 0 else np.nan
        elif e == 0:
            vals[b] = s * (m / (1 << man_bits)) * 2.0 ** (1 - bias)
        else:
            vals[b] = s * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return vals


E4M3 = _fp8_decode_table(4, 3, 7, True)
E5M2 = _fp8_decode_table(5, 2, 15, False)


def _fp8_encoder(table):
    enc = {}
    for b in range(256):
        v = table[b]
        if np.isfinite(v) and (v not in enc or b == 0):
            enc[float(v)] = b
    return enc


_E4M3_ENC = _fp8_encoder(E4M3)
_E5M2_ENC = _fp8_encoder(E5M2)


def fp8_encode(values, table):
    enc = _E4M3_ENC if table is E4M3 else _E5M2_ENC
    return np.array([enc[float(v)] for v in np.asarray(values, dtype=np.float64).ravel()], dtype=np.uint8)


def bf16_encode(values):
    f = np.asarray(values, dtype=np.float32)
    return (f.view(np.uint32) >> 16).astype(np.uint16)  # exact for the values the tests use


def bf16_round(f32):
    """bfloat16 bits of float32 values, rounded to nearest even."""
    u = np.asarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def fp8_round(f32, table):
    """fp8 codes of finite float32 values, rounded to nearest even (no saturation needed here)."""
    finite = np.array([b for b in range(256) if np.isfinite(table[b])])
    out = []
    for v in np.asarray(f32, dtype=np.float64).ravel():
        d = np.abs(table[finite] - v)
        best = finite[d == d.min()]
        even = [b for b in best if b % 2 == 0]
        out.append((even or list(best))[0])
    return np.array(out, dtype=np.uint8)


def bf16_decode(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# ----------------------------------------------------------------- cases


class Case:
    """One weft dtype as a numpy array: storage dtype, explicit dtype= (None: natural), how to
    turn exact values into storage and back."""

    def __init__(self, name, storage, wdtype, explicit=False, floating=True, bits=None):
        self.name = name
        self.storage = np.dtype(storage)
        self.wdtype = wdtype
        self.explicit = explicit
        self.floating = floating
        self.bits = bits

    def __repr__(self):
        return self.name

    @property
    def kw(self):
        """dtype= argument for weft calls."""
        return {"dtype": self.wdtype} if self.explicit else {}

    def encode(self, values):
        if self.wdtype == weft.BFLOAT16:
            return bf16_encode(values)
        if self.wdtype == weft.FP8_E4M3:
            return fp8_encode(values, E4M3)
        if self.wdtype == weft.FP8_E5M2:
            return fp8_encode(values, E5M2)
        return np.asarray(values).astype(self.storage)

    def decode(self, stored):
        if self.wdtype == weft.BFLOAT16:
            return bf16_decode(stored)
        if self.wdtype == weft.FP8_E4M3:
            return E4M3[np.asarray(stored)]
        if self.wdtype == weft.FP8_E5M2:
            return E5M2[np.asarray(stored)]
        return np.asarray(stored)

    def round_f32(self, f32):
        """Values float32 results take once rounded to this type (weft rounds once)."""
        if self.wdtype == weft.BFLOAT16:
            return bf16_decode(bf16_round(f32))
        if self.wdtype in (weft.FP8_E4M3, weft.FP8_E5M2):
            table = E4M3 if self.wdtype == weft.FP8_E4M3 else E5M2
            return table[fp8_round(f32, table)]
        return np.asarray(f32, dtype=np.float32).astype(self.storage).astype(np.float64)


NUMPY_CASES = [
    Case("float64", np.float64, weft.FLOAT64),
    Case("float32", np.float32, weft.FLOAT32),
    Case("float16", np.float16, weft.FLOAT16),
    Case("bfloat16", np.uint16, weft.BFLOAT16, explicit=True),
    Case("fp8_e4m3", np.uint8, weft.FP8_E4M3, explicit=True),
    Case("fp8_e5m2", np.uint8, weft.FP8_E5M2, explicit=True),
    Case("int8", np.int8, weft.INT8, floating=False),
    Case("uint8", np.uint8, weft.UINT8, floating=False),
    Case("int32", np.int32, weft.INT32, floating=False),
    Case("uint32", np.uint32, weft.UINT32, floating=False),
    Case("int64", np.int64, weft.INT64, floating=False),
    Case("uint64", np.uint64, weft.UINT64, floating=False),
]

OPS = [weft.SUM, weft.PROD, weft.MIN, weft.MAX, weft.AVG]
SIZES = [0, 1, 7, 1000]


def values(case, rank, n, op=weft.SUM, salt=0):
    """Exact per-rank input values (float64 or int numpy array of n) for a case and op."""
    rng = np.random.default_rng((rank * 7919 + n * 31 + int(op) * 3 + salt) % (2 ** 31))
    if case.floating:
        # Small integers: sums, products, averages (x/4) are exact in every float type.
        if op == weft.PROD:
            return rng.choice([-2.0, -1.0, 1.0, 2.0], size=n)
        return rng.integers(-2, 3, size=n).astype(np.float64)
    info = np.iinfo(case.storage)
    # The whole range: SUM and PROD wrap, as weft.h says integers do.
    return rng.integers(int(info.min), int(info.max), size=n, dtype=case.storage, endpoint=True)


def reduce_ref(case, arrays, op):
    """numpy reference for reducing the ranks' inputs (values, as from values()); returns values."""
    stack = np.stack(arrays) if arrays else np.empty((0, 0))
    n = len(arrays)
    if case.floating:
        # weft reduces half/bf16/fp8 in float32 and rounds once; our inputs keep that exact.
        if op == weft.SUM:
            return stack.sum(axis=0)
        if op == weft.PROD:
            return stack.prod(axis=0)
        if op == weft.MIN:
            return stack.min(axis=0)
        if op == weft.MAX:
            return stack.max(axis=0)
        total = stack.sum(axis=0)  # exact for our inputs
        if case.wdtype == weft.FLOAT64:
            return total / n
        return case.round_f32(total.astype(np.float32) / np.float32(n))  # divided in float32
    dt = case.storage
    if op == weft.SUM:
        return stack.sum(axis=0, dtype=dt)
    if op == weft.PROD:
        return stack.prod(axis=0, dtype=dt)
    if op == weft.MIN:
        return stack.min(axis=0)
    if op == weft.MAX:
        return stack.max(axis=0)
    wrapped = stack.sum(axis=0, dtype=dt)
    out = [(abs(int(s)) // n) * (1 if int(s) >= 0 else -1) for s in wrapped]
    return np.array(out, dtype=np.int64 if dt.kind == "i" else np.uint64).astype(dt)


def assert_values(case, got_stored, expect_values):
    got = case.decode(got_stored)
    expect = np.asarray(expect_values)
    assert got.shape == expect.shape, (got.shape, expect.shape)
    if case.floating:
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), expect.astype(np.float64))
    else:
        np.testing.assert_array_equal(got, expect.astype(case.storage))


# ----------------------------------------------------------------- parity checks with injection


def inject_enabled():
    """WEFT_TEST_INJECT=1: the parity checks corrupt one element before comparing and must then
    fail (the check inverts its expectation), proving they can fail."""
    return os.environ.get("WEFT_TEST_INJECT", "") not in ("", "0")


def relative_error(got, ref):
    """max |got - ref| / max |ref| over a tensor (numpy arrays or torch tensors), in float64."""
    g = np.asarray(got.detach().numpy() if hasattr(got, "detach") else got, dtype=np.float64)
    r = np.asarray(ref.detach().numpy() if hasattr(ref, "detach") else ref, dtype=np.float64)
    assert g.shape == r.shape, (g.shape, r.shape)
    scale = np.max(np.abs(r)) if r.size else 0.0
    diff = np.max(np.abs(g - r)) if r.size else 0.0
    return diff / scale if scale > 0 else diff


PARITY_LOG = []  # (what, measured relative error), for printing under pytest -s


def assert_parity(what, got, ref, tol):
    """relative_error(got, ref) <= tol; under WEFT_TEST_INJECT=1 one element of a copy of got is
    moved by 10 * tol * max|ref| first, and the comparison must then fail."""
    g = np.array(got.detach().numpy() if hasattr(got, "detach") else got, dtype=np.float64, copy=True)
    if inject_enabled() and g.size:
        r = np.asarray(ref.detach().numpy() if hasattr(ref, "detach") else ref, dtype=np.float64)
        g.flat[g.size // 2] += 10 * tol * max(np.max(np.abs(r)), 1.0)
        err = relative_error(g, ref)
        assert err > tol, "%s: the injected corruption was not caught (error %.3g <= %.3g)" % (what, err, tol)
        print("INJECT %s: corrupted element caught (relative error %.3g > %.3g)" % (what, err, tol))
        return
    err = relative_error(g, ref)
    PARITY_LOG.append((what, err))
    print("PARITY %s: relative error %.3g (tolerance %.3g)" % (what, err, tol))
    assert err <= tol, "%s: relative error %.3g > %.3g" % (what, err, tol)


def check(what, got, ref, rtol=0.0):
    """got equals ref (exactly, or within rtol of max|ref|); under WEFT_TEST_INJECT=1 one value
    of a copy of got is moved first and the comparison must fail."""
    g = np.array(got, dtype=np.float64, copy=True).reshape(-1)
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    assert g.shape == r.shape, (what, g.shape, r.shape)
    scale = max(float(np.max(np.abs(r))) if r.size else 0.0, 1e-30)

    def ok(a):
        return bool(np.all(np.abs(a - r) <= rtol * scale)) if rtol else bool(np.array_equal(a, r))

    if inject_enabled() and g.size:
        g[g.size // 2] += max(1.0, 10 * rtol * scale)
        assert not ok(g), "%s: the injected corruption was not caught" % what
        print("INJECT %s: caught" % what)
        return
    assert ok(g), "%s: max |diff| %.3g (rtol %.3g of %.3g)" % (what, float(np.max(np.abs(g - r))), rtol, scale)
