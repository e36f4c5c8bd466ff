"""A rank that dies under a launcher that does not reap it (its process stays a zombie) must
still be reported dead within the liveness check's period, not at the deadline: kill(pid, 0)
calls a zombie alive, so weft watches same-host peers through pidfds (core/common/
process_watch.h). This test is that launcher: it starts two ranks itself and never waits for
the one that kills itself until the survivor has answered."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import weft

PKG_PARENT = os.path.dirname(os.path.dirname(weft.__file__))
DEADLINE_S = 30


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RANK = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np
    import weft
    comm = weft.Comm.from_env(timeout=%d)
    x = np.ones(1024, np.float32)
    comm.allreduce(x)
    if comm.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)  # rank 1 is gone by now, unreaped
    t0 = time.monotonic()
    try:
        comm.allreduce(x)
        print("RESULT no-error")
    except weft.RemoteError as e:
        print("RESULT remote %%.3f %%s" %% (time.monotonic() - t0, e))
    except weft.WeftError as e:
        print("RESULT %%s %%.3f %%s" %% (type(e).__name__, time.monotonic() - t0, e))
    os._exit(0)  # the communicator is broken; nothing to tear down collectively
    """ % DEADLINE_S)


def _zombie(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_dead_unreaped_rank_is_found_before_the_deadline():
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_")}
        env.update(WEFT_RANK=str(rank), WEFT_WORLD_SIZE="2", WEFT_MASTER_ADDR="127.0.0.1",
                   WEFT_MASTER_PORT=str(port), PYTHONPATH=PKG_PARENT)
        if "WEFT_LIBRARY" in os.environ:
            env["WEFT_LIBRARY"] = os.environ["WEFT_LIBRARY"]
        procs.append(subprocess.Popen([sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        out, err = procs[0].communicate(timeout=DEADLINE_S + 30)
        # Rank 1 was never waited for: it must still be a zombie now, or the test proved nothing.
        assert _zombie(procs[1].pid), "rank 1 was reaped or is still running; the zombie case did not happen"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()
    line = next((l for l in out.splitlines() if l.startswith("RESULT")), None)
    assert line is not None, "rank 0 printed no result:\n%s\n%s" % (out, err)
    kind, seconds = line.split()[1], float(line.split()[2]) if len(line.split()) > 2 else None
    assert kind == "remote", line
    # The check runs every 100 ms; 5 s leaves room for a loaded machine and is far below 30 s.
    assert seconds < 5.0, "rank 0 learned of the death after %.1f s (deadline %d s): %s" % (seconds, DEADLINE_S, line)
    assert "rank 1" in line, line
