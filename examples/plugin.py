"""Plugins from Python: load the example C plugin (plugins/c_reduce), call its functions by name
(weft converts the arguments by the manifest's signature and calls through libffi; no
prototypes are written here), pass it a Python function as a C callback, all-reduce with one of
its operators, and register a Python function as a reduction operator of its own.

    build/bin/weftrun -n 3 /usr/bin/python3 examples/plugin.py [path/to/libweft_c_reduce.so]

Without a path it uses <the loaded libweft's folder>/../plugins/libweft_c_reduce.so. Exit status
0 when every result equals numpy's.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bindings" / "python"))

import numpy as np  # noqa: E402

import weft  # noqa: E402


def main():
    default = pathlib.Path(weft.library_path()).resolve().parent.parent / "plugins" / "libweft_c_reduce.so"
    plugin = weft.load_plugin(sys.argv[1] if len(sys.argv) > 1 else default)
    comm = weft.Comm.from_env()
    rank, size = comm.rank, comm.size
    ok = True
    if rank == 0:
        print(plugin)
        for e in plugin.entries:
            print("  %-9s %-28s %s" % (e.kind.name.lower(), e.signature(), e.doc))

    # Calls by name, and a Python function handed to C as double (*)(double).
    ok &= plugin.call("add_i64", 40, 2) == 42
    ok &= plugin.call("dot_f64", np.array([1.0, 2, 3]), np.array([4.0, 5, 6]), 3) == 32.0
    ok &= plugin.call("apply_twice", weft.Closure(lambda x: x / 2, ret="f64", args=["f64"]), 10.0) == 2.5

    # The plugin's operator in a collective: of each element, the largest magnitude over ranks.
    rng = np.random.default_rng(rank)
    x = rng.standard_normal(1001).astype(np.float32) * (rank + 1)
    everyone = [np.random.default_rng(r).standard_normal(1001).astype(np.float32) * (r + 1) for r in range(size)]
    got = comm.allreduce(x.copy(), op=plugin.entry("absmax"))
    want = everyone[0] if size == 1 else np.max(np.abs(everyone), axis=0)  # one rank: the op is never applied
    ok &= np.array_equal(got, want)

    # A Python reduction operator: the element of smaller magnitude (exact, so compared exactly).
    def absmin(dst, a, b):
        dst[...] = np.where(np.abs(a) <= np.abs(b), a, b)

    op = weft.register_op(absmin, name="absmin", dtypes=["float32"])
    got = comm.allreduce(x.copy(), op=op)
    want = everyone[0]
    for v in everyone[1:]:
        want = np.where(np.abs(want) <= np.abs(v), want, v)
    ok &= np.array_equal(got, want)
    weft.destroy_op(op)

    comm.close()
    plugin.close()
    print("rank %d: %s" % (rank, "correct" if ok else "WRONG"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
