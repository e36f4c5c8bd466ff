"""weft/plugin.h through the binding in one process, with the C plugin plugins/c_reduce
(<build>/plugins/libweft_c_reduce.so; WEFT_TEST_C_REDUCE_PLUGIN overrides the path): loading and
the manifest's entries, calling every argument type by name (integers, doubles, pointers to numpy
arrays, a tensor, a string, a Python function through a closure), the reduction operators called
directly against numpy references written here, the errors (a type mismatch naming the argument,
a bad path, a Python function that raises), and Python operators registered with register_op.

WEFT_TEST_INJECT=1 corrupts one value before each comparison (check()), which must then fail.
"""

import ctypes
import os
import pathlib

import numpy as np
import pytest

import weft
from weft import _lib

from _helpers import check, inject_enabled

pytestmark = pytest.mark.skipif(not _lib.has("weft_plugin_load"), reason="the loaded libweft lacks plugin.h")


def plugin_path():
    env = os.environ.get("WEFT_TEST_C_REDUCE_PLUGIN")
    if env:
        return env
    return str(pathlib.Path(weft.library_path()).resolve().parent.parent / "plugins" / "libweft_c_reduce.so")


@pytest.fixture(scope="module")
def plugin():
    path = plugin_path()
    if not os.path.exists(path):
        pytest.skip("the C plugin is not built: %s (cmake --build <build> --target weft_plugin_c_reduce)" % path)
    p = weft.load_plugin(path)
    yield p
    p.close()


# ------------------------------------------------------------------ manifest


def test_manifest(plugin):
    assert plugin.name and plugin.version and plugin.abi[0] == 1
    by = {e.name: e for e in plugin.entries}
    V, K = weft.ValueType, weft.PluginKind
    assert by["add_i64"].kind == K.FUNCTION and by["add_i64"].id == -1
    assert (by["add_i64"].ret, by["add_i64"].args) == (V.I64, (V.I64, V.I64))
    assert (by["dot_f64"].ret, by["dot_f64"].args) == (V.F64, (V.PTR, V.PTR, V.SIZE))
    assert (by["apply_twice"].ret, by["apply_twice"].args) == (V.F64, (V.FN, V.F64))
    assert (by["tensor_sum"].ret, by["tensor_sum"].args) == (V.F64, (V.TENSOR,))
    assert (by["strlen_u64"].ret, by["strlen_u64"].args) == (V.U64, (V.STRING,))
    ops = [by[n] for n in ("absmax", "logsumexp", "sum_f32")]
    for e in ops:
        assert e.kind == K.REDUCE_OP and e.id >= 64, e
        assert (e.ret, e.args) == (V.I32, (V.PTR, V.PTR, V.PTR, V.SIZE, V.I32)), e
    assert len({e.id for e in ops}) == 3
    assert set(by["absmax"].dtypes) == {weft.FLOAT32, weft.FLOAT64, weft.INT32, weft.INT64}
    assert set(by["logsumexp"].dtypes) == {weft.FLOAT32, weft.FLOAT64}
    assert plugin.entry("dot_f64") == by["dot_f64"]
    with pytest.raises(weft.InvalidArgument, match="no_such_entry"):
        plugin.entry("no_such_entry")


def test_load_twice_same_ids(plugin):
    again = weft.load_plugin(plugin.path)
    try:
        assert [(e.name, e.id) for e in again.entries] == [(e.name, e.id) for e in plugin.entries]
    finally:
        again.close()


def test_bad_path():
    with pytest.raises(weft.WeftError, match="no/such/plugin.so"):
        weft.load_plugin("/no/such/plugin.so")
    with pytest.raises(weft.WeftError, match="libweft"):  # a library without the manifest symbol
        weft.load_plugin(weft.library_path())


# ------------------------------------------------------------------ calls of every type


def test_integers(plugin):
    check("add_i64", [plugin.call("add_i64", 2, 40)], [42])
    big = (1 << 62) + 12345
    check("add_i64 large", [plugin.call("add_i64", big, -big + 7) - 7], [0])
    assert plugin.call("add_i64", -(1 << 63), 0) == -(1 << 63)


def test_pointers_and_size(plugin):
    x = np.linspace(-1.0, 2.0, 37)
    y = np.cos(np.arange(37, dtype=np.float64))
    ref = float(sum(a * b for a, b in zip(x.tolist(), y.tolist())))  # plain Python floats
    # A dot product in any order is within n * eps * sum|x y| of the exact one.
    check("dot_f64", [plugin.call("dot_f64", x, y, x.size)], [ref], rtol=37 * 2.3e-16 * 10)
    assert plugin.call("dot_f64", None, None, 0) == 0.0
    cx = (ctypes.c_double * 3)(1.0, 2.0, 3.0)
    check("dot_f64 ctypes", [plugin.call("dot_f64", cx, ctypes.addressof(cx), 3)], [14.0])


def test_tensor(plugin):
    t = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5.5) / 4
    check("tensor_sum", [plugin.call("tensor_sum", t)], [float(np.sum(t.astype(np.float64)))], rtol=24 * 6e-8)
    want = float(np.sum(t[:, ::2], dtype=np.float64))
    check("tensor_sum strided copy", [plugin.call("tensor_sum", t[:, ::2])], [want], rtol=24 * 6e-8)


def test_string(plugin):
    check("strlen_u64 str", [plugin.call("strlen_u64", "weft plugin")], [11])
    check("strlen_u64 utf-8", [plugin.call("strlen_u64", "\u00e9t\u00e9")], [5])
    check("strlen_u64 bytes", [plugin.call("strlen_u64", b"")], [0])
    with pytest.raises(weft.InvalidArgument, match="NUL"):
        plugin.call("strlen_u64", "a\0b")


def test_closure(plugin):
    seen = []

    def f(x):
        seen.append(x)
        return 3.0 * x + 1.0

    with weft.Closure(f, ret="f64", args=["f64"]) as c:
        check("apply_twice closure", [plugin.call("apply_twice", c, 2.0)], [3.0 * (3.0 * 2.0 + 1.0) + 1.0])
        assert seen == [2.0, 7.0]
        assert c.failures == 0
        # The function pointer itself, as an int address.
        check("apply_twice address", [plugin.call("apply_twice", c.function, 0.5)], [f(f(0.5))])
    check("apply_twice tuple", [plugin.call("apply_twice", (lambda x: x * x, "f64", ["f64"]), 3.0)], [81.0])


def test_closure_error(plugin):
    def bad(x):
        raise RuntimeError("no %g for you" % x)

    with weft.Closure(bad, ret="f64", args=["f64"]) as c:
        with pytest.raises(weft.WeftError, match="RuntimeError: no 2 for you") as info:
            plugin.call("apply_twice", c, 2.0)
        assert isinstance(info.value.__cause__, RuntimeError)
        assert c.failures >= 1 and isinstance(c.exception, RuntimeError)
    with pytest.raises(weft.InvalidArgument, match="needs its C signature"):
        plugin.call("apply_twice", lambda x: x, 1.0)


def test_reduce_ops_called_by_name(plugin):
    rng = np.random.default_rng(5)
    for dtype, wd in ((np.float32, weft.FLOAT32), (np.float64, weft.FLOAT64), (np.int32, weft.INT32),
                      (np.int64, weft.INT64)):
        a = (rng.standard_normal(33) * 100).astype(dtype)
        b = (rng.standard_normal(33) * 100).astype(dtype)
        dst = np.empty_like(a)
        assert plugin.call("absmax", dst, a, b, a.size, int(wd)) == 0
        check("absmax %s" % np.dtype(dtype).name, dst, np.maximum(np.abs(a), np.abs(b)))
    a, b = rng.standard_normal(50), rng.standard_normal(50) * 30
    dst = a.copy()
    assert plugin.call("logsumexp", dst, dst, b, a.size, int(weft.FLOAT64)) == 0  # dst may be a
    ref = np.array([max(x, y) + np.log1p(np.exp(-abs(x - y))) for x, y in zip(a.tolist(), b.tolist())])
    check("logsumexp float64", dst, ref, rtol=4e-16)


def test_type_mismatch(plugin):
    with pytest.raises(weft.InvalidArgument, match=r"argument 0 of 'add_i64': expected I64 \(an int\), got float"):
        plugin.call("add_i64", 1.5, 2)
    with pytest.raises(weft.InvalidArgument, match="takes 2 arguments"):
        plugin.call("add_i64", 1)
    with pytest.raises(weft.InvalidArgument, match="does not fit U64"):
        weft._plugin._to_c(-1, weft.ValueType.U64, "u", [])
    # weft's own check, past the binding's: a tagged value of the wrong type.
    args = (_lib.weft_value_t * 2)(_lib.weft_value_t(int(weft.ValueType.F64), 0, 1.5, None),
                                   _lib.weft_value_t(int(weft.ValueType.I64), 2, 0.0, None))
    out = _lib.weft_value_t()
    st = _lib.fn("weft_plugin_call")(plugin._h(), b"add_i64", args, 2, ctypes.byref(out))
    assert st == int(weft.Status.INVALID_ARGUMENT)
    msg = _lib.lib().weft_last_error().decode()
    assert "add_i64" in msg and "expected I64, got F64" in msg, msg
    with pytest.raises(weft.InvalidArgument, match="no_such"):
        plugin.call("no_such", 1)


# ------------------------------------------------------------------ extension ids in configs


def test_extension_ids(plugin):
    op = plugin.entry("absmax")
    assert weft.as_op(op) == op.id
    with pytest.raises(weft.InvalidArgument, match="not a registered extension"):
        weft.as_op(plugin.entry("add_i64"))
    assert weft.RouterConfig(4, 1, selector=0).selector == 0
    with pytest.raises(weft.InvalidArgument, match="selector"):
        weft.RouterConfig(4, 1, selector=3)
    # The new config fields reach weft: an operator's id is no cost model, router or generator.
    s = weft.Schedule.generate("1f1b", ranks=2, microbatches=4)
    with pytest.raises(weft.InvalidArgument, match="no cost model with id %d" % op.id):
        s.simulate(None, cost_model=op, microbatch_size=2)
    with pytest.raises(weft.InvalidArgument, match="no cost model with id %d" % op.id):
        weft.tune(2, [], [], 8, cost_model=op.id)
    with pytest.raises(weft.InvalidArgument, match="no router selector with id %d" % op.id):
        weft.route(np.zeros((3, 4), np.float32), experts=4, topk=1, selector=op)
    with pytest.raises(weft.InvalidArgument, match="no schedule generator with id %d" % op.id):
        weft.Schedule.generate(op, ranks=2, microbatches=4)
    s.close()


def test_register_op_local():
    op = weft.register_op(lambda d, a, b: np.maximum(a, b, out=d), name="pymax", dtypes=["float32", np.float64])
    try:
        assert op.id >= 64 and op.name == "pymax" and op.dtypes == (weft.FLOAT32, weft.FLOAT64)
        assert weft.as_op(op) == op.id
    finally:
        weft.destroy_op(op)
    with pytest.raises(weft.WeftError):
        weft.destroy_op(op)  # already gone
    with pytest.raises(weft.InvalidArgument, match="dtypes is empty"):
        weft.register_op(lambda d, a, b: None, dtypes=[])
    with pytest.raises(weft.WeftError):
        weft.destroy_op(weft.SUM)  # built-in ops are refused


def test_struct_layouts_match_the_header():
    # LP64: sizeof/offsetof of plugin.h's structs and of the fields it added to the family
    # headers, measured with the C compiler.
    assert ctypes.sizeof(_lib.weft_plugin_info_t) == 48 and _lib.weft_plugin_info_t.nentries.offset == 40
    e = _lib.weft_plugin_entry_t
    assert ctypes.sizeof(e) == 88 and (e.ret.offset, e.args.offset, e.dtypes.offset, e.id.offset) == (40, 48, 64, 80)
    v = _lib.weft_value_t
    assert ctypes.sizeof(v) == 32 and (v.i.offset, v.f.offset, v.p.offset) == (8, 16, 24)
    assert ctypes.sizeof(_lib.weft_op_config_t) == 48 and _lib.weft_op_config_t.ndtypes.offset == 40
    assert ctypes.sizeof(_lib.weft_router_config_t) == 72 and _lib.weft_router_config_t.selector.offset == 64
    c = _lib.weft_pipeline_costs_t
    assert ctypes.sizeof(c) == 112 and (c.cost_model.offset, c.microbatch_size.offset) == (104, 108)
    assert ctypes.sizeof(_lib.weft_tune_config_t) == 128 and _lib.weft_tune_config_t.cost_model.offset == 120
