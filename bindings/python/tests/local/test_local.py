"""Single-process tests: finding the library, dtype and buffer mapping, status -> exception
mapping, unique ids, a one-rank communicator, and jobs this test starts itself (torchrun-style
environment without WEFT_*, a rank that dies)."""

import os
import pathlib
import pickle
import shutil
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import weft
from weft import _errors, _lib

PKG_PARENT = pathlib.Path(weft.__file__).resolve().parent.parent  # bindings/python
REPO = PKG_PARENT.parent.parent
WEFTRUN = REPO / "build" / "bin" / "weftrun"
PY = sys.executable


def clean_env(**extra):
    """This environment without any launcher's variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WEFT_", "OMPI_", "PMI_", "SLURM_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = str(PKG_PARENT)
    env.update(extra)
    return env


def run_py(code, env, cwd=None, timeout=120):
    return subprocess.run([PY, "-W", "error", "-c", textwrap.dedent(code)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------ finding the library

def test_library_found_in_build_tree():
    assert weft.library_path() == str(REPO / "build" / "lib" / "libweft.so") or "WEFT_LIBRARY" in os.environ
    code, abi = weft.version()
    assert abi == weft.ABI_VERSION and code >= 100


def test_missing_library_names_every_place(tmp_path):
    shutil.copytree(PKG_PARENT / "weft", tmp_path / "weft", ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    env = clean_env(PYTHONPATH=str(tmp_path), LD_LIBRARY_PATH="")
    r = run_py("""
        import warnings
        warnings.filterwarnings("ignore", "weft: ")  # import's LibraryNotFoundWarning (-W error)
        import weft
        try:
            weft.Comm.from_env()
        except weft.LibraryNotFoundError as e:
            print(e)
        """, env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "libweft.so could not be loaded" in out
    assert "next to the package: %s" % (tmp_path / "weft" / "libweft.so") in out
    assert "build tree: %s" % (tmp_path.parent.parent / "build" / "lib" / "libweft.so") in out
    assert "system library path (dynamic loader): libweft.so.0" in out


def test_weft_library_is_authoritative(tmp_path):
    env = clean_env(WEFT_LIBRARY=str(tmp_path / "nope.so"))
    r = run_py("""
        import warnings
        warnings.filterwarnings("ignore", "weft: ")  # import's LibraryNotFoundWarning (-W error)
        import weft
        try:
            weft.version()
        except OSError as e:
            print(type(e).__name__, e)
        """, env)
    assert "LibraryNotFoundError" in r.stdout and "WEFT_LIBRARY: %s (no such file)" % (tmp_path / "nope.so") in r.stdout
    assert "no other place was tried" in r.stdout
    env = clean_env(WEFT_LIBRARY=str(REPO / "build" / "lib"))  # a folder works too
    r = run_py("import weft; print(weft.library_path())", env)
    assert r.stdout.strip() == str(REPO / "build" / "lib" / "libweft.so"), r.stderr


def test_library_next_to_package(tmp_path):
    shutil.copytree(PKG_PARENT / "weft", tmp_path / "weft", ignore=shutil.ignore_patterns("__pycache__"))
    os.symlink(REPO / "build" / "lib" / "libweft.so", tmp_path / "weft" / "libweft.so")
    r = run_py("import weft; print(weft.library_path())", clean_env(PYTHONPATH=str(tmp_path)), cwd=str(tmp_path))
    assert r.stdout.strip() == str(tmp_path / "weft" / "libweft.so"), r.stderr


def test_every_function_declared():
    # weft.h is an umbrella over one header per handle family: read them all.
    header = "".join(h.read_text() for h in sorted((REPO / "capi" / "include" / "weft").glob("*.h")))
    import re
    declared = set(re.findall(r"^(?:const char \*|weft_status_t )(weft_\w+)\(", header, re.M))
    assert declared == set(_lib.PROTOTYPES), declared ^ set(_lib.PROTOTYPES)
    lib = _lib.lib()
    for name in declared:
        assert getattr(lib, name).argtypes is not None or name == "weft_last_error"


def test_import_is_warning_clean():
    r = run_py("import weft, weft.torch, weft._comm, weft._buffers, weft._errors, weft._lib", clean_env())
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ dtypes and buffers

@pytest.mark.parametrize("value,expect", [
    (np.float64, weft.FLOAT64), (np.dtype("float32"), weft.FLOAT32), ("float16", weft.FLOAT16),
    ("bfloat16", weft.BFLOAT16), ("fp8_e4m3", weft.FP8_E4M3), ("float8_e5m2", weft.FP8_E5M2),
    (np.int8, weft.INT8), (np.uint8, weft.UINT8), (np.int32, weft.INT32), (np.uint32, weft.UINT32),
    (np.int64, weft.INT64), (np.uint64, weft.UINT64), (3, weft.BFLOAT16), (weft.INT8, weft.INT8),
])
def test_as_dtype(value, expect):
    assert weft.as_dtype(value) is expect


def test_as_dtype_torch():
    torch = pytest.importorskip("torch")
    for t, w in [(torch.float64, weft.FLOAT64), (torch.float32, weft.FLOAT32), (torch.float16, weft.FLOAT16),
                 (torch.bfloat16, weft.BFLOAT16), (torch.int8, weft.INT8), (torch.uint8, weft.UINT8),
                 (torch.int32, weft.INT32), (torch.int64, weft.INT64)]:
        assert weft.as_dtype(t) is w
    with pytest.raises(weft.InvalidArgument):
        weft.as_dtype(torch.complex64)


def test_dtype_sizes_match_library():
    for d in weft.DType:
        assert weft.dtype_size(d) == d.itemsize
    with pytest.raises(weft.InvalidArgument):
        weft.as_dtype(99)


@pytest.mark.parametrize("array,dtype", [
    (np.zeros(3, np.float64), weft.FLOAT64), (np.zeros(3, np.float32), weft.FLOAT32),
    (np.zeros(3, np.float16), weft.FLOAT16), (np.zeros(3, np.int8), weft.INT8), (np.zeros(3, np.uint8), weft.UINT8),
    (np.zeros(3, np.int32), weft.INT32), (np.zeros(3, np.uint32), weft.UINT32), (np.zeros(3, np.int64), weft.INT64),
    (np.zeros(3, np.uint64), weft.UINT64), (np.zeros(3, np.longlong), weft.INT64),
    (np.zeros(3, np.ulonglong), weft.UINT64), (bytearray(3), weft.UINT8),
])
def test_buffer_protocol_dtypes(array, dtype):
    b = weft.as_buffer(array)
    assert b.dtype is dtype and b.count == 3 and not b.readonly
    b.release()


def test_buffer_details():
    b = weft.as_buffer(bytes(5))
    assert b.readonly and b.dtype is weft.UINT8
    b.release()
    b.release()  # idempotent
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = weft.as_buffer(a[1])
    assert b.ptr == a.ctypes.data + 16 and b.count == 4
    bf = weft.as_buffer(np.zeros(4, np.uint16), dtype="bfloat16")
    assert bf.dtype is weft.BFLOAT16 and bf.count == 4
    raw = weft.as_buffer(bytearray(16), dtype=np.float64)
    assert raw.dtype is weft.FLOAT64 and raw.count == 2
    fp8 = weft.as_buffer(np.zeros(7, np.uint8), dtype=weft.FP8_E5M2)
    assert fp8.count == 7
    with pytest.raises(weft.InvalidArgument, match="whole number"):
        weft.as_buffer(bytearray(6), dtype="float32")
    with pytest.raises(weft.InvalidArgument, match="cannot reinterpret"):
        weft.as_buffer(np.zeros(2, np.float32), dtype="int32")
    big = np.zeros(2, dtype=">f4")
    assert weft.as_buffer(big).dtype is None  # big-endian: moved as bytes only
    assert weft.as_buffer(np.zeros(3, bool)).dtype is None
    with pytest.raises(weft.InvalidArgument, match="datetime|dtype|buffer"):
        weft.as_buffer(np.zeros(3, "datetime64[s]"))


def test_dlpack_tensors():
    torch = pytest.importorskip("torch")
    t = torch.arange(10, dtype=torch.float32)
    b = weft.as_buffer(t[2:6])
    assert b.ptr == t.data_ptr() + 8 and b.count == 4 and b.dtype is weft.FLOAT32
    b.release()
    assert weft.as_buffer(torch.zeros(2, 3, dtype=torch.bfloat16)).dtype is weft.BFLOAT16
    assert weft.as_buffer(torch.zeros(0)).count == 0
    with pytest.raises(weft.InvalidArgument, match="contiguous"):
        weft.as_buffer(torch.zeros(4, 4)[:, 0])
    with pytest.raises(weft.InvalidArgument, match="require gradient"):
        weft.as_buffer(torch.zeros(2, requires_grad=True))


# ------------------------------------------------------------------ errors

def test_status_to_exception_mapping():
    expected = {
        weft.Status.INVALID_ARGUMENT: weft.InvalidArgument, weft.Status.UNSUPPORTED: weft.Unsupported,
        weft.Status.OUT_OF_MEMORY: weft.OutOfMemory, weft.Status.TIMEOUT: weft.Timeout,
        weft.Status.REMOTE: weft.RemoteError, weft.Status.ABORTED: weft.Aborted,
        weft.Status.MISMATCH: weft.Mismatch, weft.Status.TRANSPORT: weft.TransportError,
        weft.Status.INTERNAL: weft.InternalError,
    }
    for status, cls in expected.items():
        e = _errors.error_for(int(status), "words")
        assert type(e) is cls and isinstance(e, weft.WeftError)
        assert e.status == status and e.message == "words"
        assert str(e) == "[%s] words" % status.name
        assert weft.status_string(status)
    assert type(_errors.error_for(42, "odd")) is weft.WeftError
    assert issubclass(weft.InvalidArgument, ValueError) and issubclass(weft.OutOfMemory, MemoryError)


def test_library_message_reaches_the_exception():
    with pytest.raises(weft.InvalidArgument) as e:
        weft.Comm(weft.UniqueId(bytes(128)), 0, 1)
    assert "weft_comm_init" in e.value.message and "unique id" in e.value.message


def test_from_env_without_launcher_says_what_is_missing(monkeypatch):
    for k in list(os.environ):
        if k.startswith(("WEFT_", "OMPI_", "PMI_", "SLURM_")) or k in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                                      "MASTER_PORT"):
            monkeypatch.delenv(k)
    with pytest.raises(weft.InvalidArgument) as e:
        weft.Comm.from_env()
    assert "RANK" in e.value.message


# ------------------------------------------------------------------ unique id and a one-rank communicator

def test_unique_id_is_bytes():
    uid = weft.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128
    assert pickle.loads(pickle.dumps(uid)) == uid
    with pytest.raises(weft.InvalidArgument, match="128"):
        weft.UniqueId(b"short")


def test_unique_id_port_override(monkeypatch):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    busy = s.getsockname()[1]
    monkeypatch.setenv("WEFT_MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("WEFT_MASTER_PORT", str(busy))  # a launcher's store: never bound by get_unique_id
    try:
        uid = weft.get_unique_id()  # any free port
        with weft.Comm(uid, 0, 1) as c:
            c.barrier()
        with pytest.raises(weft.WeftError, match="bind"):
            weft.get_unique_id(port=busy)  # explicitly asked for a taken port
        assert "WEFT_UNIQUE_ID_PORT" not in os.environ  # restored
    finally:
        s.close()
    with pytest.raises(weft.InvalidArgument):
        weft.get_unique_id(port=70000)


def test_one_rank_communicator():
    with weft.Comm(weft.get_unique_id(), 0, 1, timeout=30, name="solo", check=True) as c:
        assert (c.rank, c.size, c.local_rank, c.local_size) == (0, 1, 0, 1)
        x = np.arange(6, dtype=np.float32)
        assert c.allreduce(x, op=weft.MAX) is x and list(x) == list(range(6))
        y = np.zeros(6, np.float32)
        c.allgather(x, y)
        c.alltoallv(x, [6], y, [6])
        c.reduce_scatter(x, y, op="sum")
        req = c.broadcast(x, async_op=True)
        assert req.wait() is x and "done" in repr(req)
        with c.dup() as d, c.split(7, 0, timeout=5) as s:
            d.barrier()
            s.barrier()
        assert c.split(weft.SPLIT_NOCOLOR) is None
        with pytest.raises(weft.InvalidArgument, match="timeout"):
            c.split(0, timeout=-1)
    assert c.closed and "closed" in repr(c)


# ------------------------------------------------------------------ jobs started here

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TORCHRUN_SCRIPT = """
import os, sys
sys.path.insert(0, %r)
import torch, torch.distributed as dist
import weft.torch
dist.init_process_group("weft")
r, s = dist.get_rank(), dist.get_world_size()
t = torch.full((3,), float(r + 1))
dist.all_reduce(t)
pg = dist.group.WORLD
assert "WEFT_RANK" not in os.environ
print("rank %%d sum %%s size %%d" %% (r, t.tolist(), pg.comm.size), flush=True)
dist.destroy_process_group()
""" % str(PKG_PARENT)


def test_torchrun_style_env_without_weft_variables():
    port = free_port()
    procs = []
    for r in range(2):
        env = clean_env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=str(port))
        procs.append(subprocess.Popen([PY, "-W", "error", "-c", TORCHRUN_SCRIPT], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert "rank 0 sum [3.0, 3.0, 3.0] size 2" in outs[0][0]
    assert "rank 1 sum [3.0, 3.0, 3.0] size 2" in outs[1][0]


DIES_SCRIPT = """
import os, sys, time
sys.path.insert(0, %r)
import numpy as np, weft
c = weft.Comm.from_env(timeout=60)
if c.rank == 1:
    os._exit(0)
try:
    c.recv(np.zeros(1), 1)
except weft.RemoteError as e:
    print("remote:", e.message)
""" % str(PKG_PARENT)


@pytest.mark.skipif(not WEFTRUN.exists(), reason="needs build/bin/weftrun")
def test_dead_peer_is_remote_error():
    r = subprocess.run([str(WEFTRUN), "-n", "2", "--timeout", "60", PY, "-W", "error", "-c", DIES_SCRIPT],
                       env=clean_env(), capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "remote:" in r.stdout and "rank 1" in r.stdout
