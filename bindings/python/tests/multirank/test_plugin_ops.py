"""Reduction operators from outside weft, on every rank of a weftrun job, against numpy:

  * Python functions registered with weft.register_op (through weft_op_create's callback path):
    an elementwise max of |x| (exact: max and abs round nothing) and a log-add-exp merge
    (log(e^a + e^b), float64), in allreduce, reduce and reduce_scatter, at sizes from 1 to beyond
    one pipeline chunk (several calls of the function per collective);
  * the C plugin's REDUCE_OP entries (plugins/c_reduce: absmax, logsumexp) through
    weft.load_plugin, passed as op= directly.

Every rank can compute every rank's input (a function of rank, size and seed), so each checks its
own result against a numpy reduction of all inputs. log-add-exp is not associative in floating
point: weft merges in an order of its choosing, each merge rounds to within ~2 ulp of the exact
log(e^a + e^b) (a max plus log1p of a number <= 1), so p - 1 merges stay within 2 (p - 1) eps of
the float64 reference relative to its magnitude (inputs are in [-5, 5], results in [-5, 7]):
checked against rtol = 8 p eps.

WEFT_TEST_INJECT=1 corrupts one value before each comparison (check()), which must then fail.
"""

import os
import pathlib

import numpy as np
import pytest

import weft
from weft import _lib

from _helpers import check, inject_enabled

pytestmark = pytest.mark.skipif(not _lib.has("weft_op_create"), reason="the loaded libweft lacks plugin.h")

SIZES = (1, 7, 1000, 300_001)  # 300001 float32: beyond one shared-memory slot, so chunked
EPS64 = np.finfo(np.float64).eps


def inputs(rank, n, dtype, seed):
    g = np.random.default_rng(1000 * seed + rank)
    if np.issubdtype(dtype, np.integer):
        return g.integers(-10**6, 10**6, n).astype(dtype)
    return (g.random(n) * 10 - 5).astype(dtype)


CALLS = {"absmax": 0, "logaddexp": 0}  # calls of the Python functions on this rank


def py_absmax(dst, a, b):
    CALLS["absmax"] += 1
    np.maximum(np.abs(a), np.abs(b), out=dst)


def py_logaddexp(dst, a, b):
    CALLS["logaddexp"] += 1
    return np.logaddexp(a, b)  # returned, not written: the binding copies it into dst


def ref_absmax(vals):
    return np.max(np.abs(np.stack(vals)), axis=0)


def ref_logaddexp(vals):
    return np.logaddexp.reduce(np.stack(vals).astype(np.float64), axis=0)


@pytest.fixture(scope="module")
def py_ops(world):
    # Every rank registers in the same order, so the ids agree.
    ops = {"absmax": weft.register_op(py_absmax, name="py_absmax", dtypes=["float32", "float64", "int64"]),
           "logaddexp": weft.register_op(py_logaddexp, name="py_logaddexp", dtypes=["float64"])}
    ids = np.array([int(ops["absmax"]), int(ops["logaddexp"])], np.int64)
    everyone = np.zeros(2 * world.size, np.int64)
    world.allgather(ids, everyone)
    assert (everyone.reshape(world.size, 2) == ids).all(), "ranks registered different ids: %s" % everyone
    yield ops
    world.barrier()
    for op in ops.values():
        weft.destroy_op(op)


CASES = [("absmax", np.float32, ref_absmax, 0.0), ("absmax", np.float64, ref_absmax, 0.0),
         ("absmax", np.int64, ref_absmax, 0.0), ("logaddexp", np.float64, ref_logaddexp, None)]


def _tol(rtol, world):
    return 8 * world.size * EPS64 if rtol is None else rtol


@pytest.mark.parametrize("name,dtype,ref,rtol", CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_python_op_allreduce(world, py_ops, name, dtype, ref, rtol):
    before = CALLS[name]
    for n in SIZES:
        vals = [inputs(r, n, dtype, 1) for r in range(world.size)]
        out = np.empty(n, dtype)
        world.allreduce(vals[world.rank], out, op=py_ops[name])
        check("allreduce %s %s n=%d" % (name, np.dtype(dtype).name, n), out, ref(vals), _tol(rtol, world))
        mine = vals[world.rank].copy()
        world.allreduce(mine, op=py_ops[name])  # in place
        check("allreduce in place %s n=%d" % (name, n), mine, ref(vals), _tol(rtol, world))
    assert py_ops[name].failures == 0, py_ops[name].exception
    # Every rank combines partial results somewhere in a 300001-element all-reduce (by chunks).
    assert CALLS[name] > before, "the Python operator was never called on rank %d" % world.rank


@pytest.mark.parametrize("name,dtype,ref,rtol", CASES[1:], ids=lambda c: c if isinstance(c, str) else None)
def test_python_op_reduce_and_reduce_scatter(world, py_ops, name, dtype, ref, rtol):
    root = world.size - 1
    for n in (5, 4099):
        vals = [inputs(r, n, dtype, 2) for r in range(world.size)]
        out = np.empty(n, dtype)
        got = world.reduce(vals[world.rank], out if world.rank == root else None, op=py_ops[name], root=root)
        if world.rank == root:
            check("reduce %s n=%d" % (name, n), got, ref(vals), _tol(rtol, world))
        block = n
        vals = [inputs(r, block * world.size, dtype, 3) for r in range(world.size)]
        out = np.empty(block, dtype)
        world.reduce_scatter(vals[world.rank], out, op=py_ops[name])
        want = ref(vals)[world.rank * block:(world.rank + 1) * block]
        check("reduce_scatter %s block=%d" % (name, block), out, want, _tol(rtol, world))


def _c_plugin():
    env = os.environ.get("WEFT_TEST_C_REDUCE_PLUGIN")
    path = env or str(pathlib.Path(weft.library_path()).resolve().parent.parent / "plugins" / "libweft_c_reduce.so")
    if not os.path.exists(path):
        pytest.skip("the C plugin is not built: %s" % path)
    return weft.load_plugin(path)


def test_c_plugin_ops(world):
    plugin = _c_plugin()
    try:
        absmax, lse = plugin.entry("absmax"), plugin.entry("logsumexp")
        for dtype in (np.float32, np.float64, np.int32, np.int64):
            for n in SIZES:
                vals = [inputs(r, n, dtype, 4) for r in range(world.size)]
                out = np.empty(n, dtype)
                world.allreduce(vals[world.rank], out, op=absmax)
                check("C absmax %s n=%d" % (np.dtype(dtype).name, n), out, ref_absmax(vals))
        for n in SIZES:
            vals = [inputs(r, n, np.float64, 5) for r in range(world.size)]
            mine = vals[world.rank].copy()
            world.allreduce(mine, op=lse)
            check("C logsumexp n=%d" % n, mine, ref_logaddexp(vals), _tol(None, world))
        vals = [inputs(r, 6 * world.size, np.float32, 6) for r in range(world.size)]
        out = np.empty(6, np.float32)
        world.reduce_scatter(vals[world.rank], out, op=absmax)
        check("C absmax reduce_scatter", out, ref_absmax(vals)[6 * world.rank:6 * (world.rank + 1)])
    finally:
        plugin.close()


def test_python_op_that_raises(world):
    # Every rank's function raises (each rank combines some chunk), so every rank's all-reduce fails
    # with weft's words (the operator's name) and the Python exception chained; the communicator
    # stays usable.
    def refuse(dst, a, b):
        raise ValueError("refused on rank %d" % world.rank)

    op = weft.register_op(refuse, name="py_refuse", dtypes=["float32"])
    try:
        x = np.ones(1000, np.float32)
        with pytest.raises(weft.WeftError, match="py_refuse.*ValueError: refused on rank %d" % world.rank) as info:
            world.allreduce(x, op=op)
        assert isinstance(info.value.__cause__, ValueError) and op.failures >= 1
        x = np.ones(1000, np.float32)  # the failed call may have left partial results in x
        world.allreduce(x)
        check("all-reduce after the failure", x, np.full(1000, world.size, np.float64))
    finally:
        world.barrier()
        weft.destroy_op(op)
