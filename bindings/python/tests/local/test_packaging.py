"""The package as a user installs it (issue 18): `pip install ./bindings/python` offline into a
virtual environment (Debian's setuptools, no index, no build isolation), then used from outside
the checkout, finding libweft.so through WEFT_LIBRARY; a wheel built with WEFT_BUNDLE_LIBRARY that
carries its own library and needs no variable; the clear message when no library is found; and
the docstrings help() shows. Each check runs a fresh interpreter of the environment in a folder
outside the checkout, so nothing of the source tree can leak in."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import weft

PACKAGE_SRC = pathlib.Path(__file__).resolve().parents[2]  # bindings/python


def _run(cmd, cwd, env=None, check=True):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "PYTHON"))}
    full_env.update(env or {})
    r = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        pytest.fail("%s failed (%d):\n%s\n%s" % (" ".join(map(str, cmd)), r.returncode, r.stdout, r.stderr))
    return r


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    if shutil.which("pip3") is None and _run([sys.executable, "-m", "pip", "--version"], "/", check=False).returncode:
        pytest.skip("pip is not installed (python3-pip; bindings/python/install-deps installs it)")
    root = tmp_path_factory.mktemp("packaging")
    # A copy: pip writes build/ and *.egg-info next to the sources it builds.
    src = root / "src"
    shutil.copytree(PACKAGE_SRC, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    return root, src


def _venv(root, name):
    venv = root / name
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], root)
    return venv / "bin" / "python"


def test_pip_install_then_import_with_weft_library(scratch):
    root, src = scratch
    py = _venv(root, "plain")
    _run([py, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", str(src)], root)
    out = _run([py, "-c", "import weft; print(weft.__file__); print(weft.version()); print(weft.library_path())"],
               root, {"WEFT_LIBRARY": weft.library_path()}).stdout.split("\n")
    assert "site-packages" in out[0] and str(PACKAGE_SRC) not in out[0], out
    assert out[1] == str(weft.version()), out
    assert out[2] == weft.library_path(), out
    # The type marker travels with the package.
    assert _run([py, "-c", "import weft, pathlib; print((pathlib.Path(weft.__file__).parent / 'py.typed').exists())"],
                root, {"WEFT_LIBRARY": weft.library_path()}).stdout.strip() == "True"


def test_missing_library_says_where_it_looked(scratch):
    root, src = scratch
    py = root / "plain" / "bin" / "python"
    if not py.exists():
        pytest.skip("needs the environment of the previous test")
    r = _run([py, "-c", "import weft; print('imported')"], root, {"WEFT_LIBRARY": str(root / "nowhere.so")})
    assert "imported" in r.stdout  # the package still imports (help(), type checkers)
    assert "LibraryNotFoundWarning" in r.stderr and "nowhere.so (no such file)" in r.stderr, r.stderr
    r = _run([py, "-c", "import weft; weft.version()"], root, {"WEFT_LIBRARY": str(root / "nowhere.so")}, check=False)
    assert r.returncode != 0 and "LibraryNotFoundError" in r.stderr, r.stderr


def test_wheel_that_carries_the_library(scratch):
    root, src = scratch
    py = _venv(root, "builder")
    wheels = root / "wheels"
    _run([py, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(wheels),
          str(src)], root, {"WEFT_BUNDLE_LIBRARY": os.path.realpath(weft.library_path())})
    wheel = next(wheels.glob("weft-*.whl"))
    assert "linux" in wheel.name, wheel.name  # a platform wheel: it carries a native library
    user = _venv(root, "user")
    _run([user, "-m", "pip", "install", "-q", "--no-index", str(wheel)], root)
    out = _run([user, "-c", "import weft; print(weft.library_path()); print(weft.version())"], root).stdout.split("\n")
    assert out[0].endswith("site-packages/weft/libweft.so"), out
    assert out[1] == str(weft.version()), out


def test_help_shows_docstrings():
    import pydoc
    text = pydoc.render_doc(weft.Comm, renderer=pydoc.plaintext)
    assert "allreduce" in text and "from_env" in text
    assert weft.Comm.__doc__ and weft.Comm.allreduce.__doc__, "public methods need docstrings"


def _public_callables(obj):
    """(qualified name, function) for obj itself when it is a function, or for a class: its
    constructor (__init__ or __new__) and every public method and property it or a weft base
    class defines."""
    import inspect
    if not inspect.isclass(obj):
        yield obj.__name__, obj
        return
    for cls in obj.__mro__:
        if not cls.__module__.startswith("weft"):
            continue  # Exception, enum.IntEnum, tuple...: not ours to annotate
        for name, member in vars(cls).items():
            # Request objects are made by the binding, never by users: its __init__ is internal.
            constructor = name in ("__init__", "__new__") and cls.__name__ != "Request"
            if name.startswith("_") and not constructor:
                continue
            fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            # Only code of weft: enum's and namedtuple's generated __new__ are the standard library's
            # (a namedtuple's fields are checked as the class's annotations instead).
            if inspect.isfunction(fn) and fn.__module__.startswith("weft"):
                yield "%s.%s" % (obj.__name__, name), fn


def _untyped(name, fn):
    """Why fn's annotations fall short, or None: a return annotation, one per parameter, all
    resolvable by typing.get_type_hints (which evaluates each string), and a docstring."""
    import inspect
    import typing
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # a name that does not resolve in the function's module
        return "%s: annotations do not resolve: %r" % (name, e)
    if "return" not in hints:
        return "%s has no return annotation" % name
    params = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
    missing = [p for p in params if p not in hints]
    if missing:
        return "%s: parameters without annotations: %s" % (name, missing)
    if not (fn.__doc__ or fn.__name__ in ("__init__", "__new__")):  # the class's docstring covers those
        return "%s has no docstring" % name
    return None


def test_public_api_is_typed():
    """py.typed promises annotations: every function and class in weft.__all__ (constructor,
    public methods, properties, also those inherited from a weft base class) has them, they
    resolve, and each has a docstring for help(); a namedtuple's fields are annotated
    (typing.NamedTuple). Constants are skipped.
    To see it fail: delete one annotation (say as_dtype's return) and run this test."""
    import inspect
    import typing
    problems, checked = [], 0
    for export in weft.__all__:
        obj = getattr(weft, export)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if inspect.isclass(obj) and not obj.__doc__:
            problems.append("%s has no docstring" % export)
        if inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
            checked += 1
            try:
                fields = typing.get_type_hints(obj)
            except Exception as e:
                problems.append("%s: field annotations do not resolve: %r" % (export, e))
            else:
                untyped = [f for f in obj._fields if f not in fields]
                if untyped:
                    problems.append("%s: fields without annotations (use typing.NamedTuple): %s" % (export, untyped))
        for name, fn in _public_callables(obj):
            checked += 1
            why = _untyped(name, fn)
            if why:
                problems.append(why)
    assert checked > 150, "walked only %d callables: is __all__ being read?" % checked
    assert not problems, "%d untyped public callables:\n  %s" % (len(problems), "\n  ".join(problems))
