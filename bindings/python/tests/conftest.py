"""Shared test setup: the package and _helpers importable from a checkout; the world
communicator of a weftrun job (multi-rank tests are skipped outside one)."""

import pathlib
import sys

import pytest

_HERE = pathlib.Path(__file__).resolve().parent
for p in (str(_HERE.parent), str(_HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import weft  # noqa: E402
from _helpers import under_launcher  # noqa: E402


@pytest.fixture(scope="session")
def world():
    if not under_launcher():
        pytest.skip("multi-rank test: run under build/bin/weftrun -n N (see bindings/python/run-tests)")
    comm = weft.Comm.from_env(name="pytest")
    yield comm
    comm.close()
