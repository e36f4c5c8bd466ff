"""Comm.shrink() (weft_comm_shrink): a rank of a data-parallel job kill -9s itself with an
allreduce in flight; the survivors catch the error, shrink, check that they agree on the
members and train on (linear regression, gradients averaged by allreduce), every loss checked
against a one-process numpy reference on the survivors' data.

This test is the launcher (weftrun stops every rank when one dies): it hosts the store
(get_unique_id) and starts the ranks as subprocesses. The agreement check (judge) is proven
to fail on purpose by a run with WEFT_TEST_SHRINK_DROP, which makes one survivor drop a member
from its result (core/comm/shrink.h)."""

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import weft

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_local import PY, clean_env  # noqa: E402

FEATURES, SAMPLES, STEPS, LR = 4, 16, 30, 0.5
W_TRUE = np.array([1.5, -2.0, 0.5, 3.0])
# Both sides sum at most 5 * 16 products of values below ~10 in float64, in different orders:
# relative differences stay below 1e-12; 1e-9 leaves margin.
RTOL = 1e-9

RANK = textwrap.dedent("""
    import json, os, signal, sys
    import numpy as np
    import weft
    uid, rank, n, victim = bytes.fromhex(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    FEATURES, SAMPLES, STEPS, LR = 4, 16, 30, 0.5

    def shard(r):
        rng = np.random.default_rng(1000 + r)
        x = rng.uniform(-1, 1, (SAMPLES, FEATURES))
        return x, x @ np.array([1.5, -2.0, 0.5, 3.0]) + 0.01 * rng.uniform(-1, 1, SAMPLES)

    comm = weft.Comm(uid, rank, n, timeout=3, name="py-shrink")
    buf = np.empty(4096, np.float32)
    for it in range(100000):
        buf[:] = rank + 1
        if rank == victim and it == 5:
            pending = comm.allreduce(buf, async_op=True)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            comm.allreduce(buf)
        except (weft.RemoteError, weft.Timeout) as e:
            print("saw:", e, file=sys.stderr, flush=True)
            break
    out = {"rank": rank}
    new = None
    try:
        new = comm.shrink()
        members = np.zeros(new.size, np.int32)
        new.allgather(np.array([rank], np.int32), members)
        out["members"] = members.tolist()
        x, y = shard(rank)
        w, losses = np.zeros(FEATURES), []
        for step in range(STEPS):
            err = x @ w - y
            packed = np.concatenate([2 * x.T @ err / SAMPLES, [np.mean(err * err)]])
            new.allreduce(packed, op=weft.AVG)
            losses.append(float(packed[-1]))
            w -= LR * packed[:FEATURES]
        out["losses"] = losses
    except weft.WeftError as e:
        out["error"] = str(e)
    print(json.dumps(out), flush=True)
    if new is not None:
        new.close()
    comm.close()
""")


def shard(r):
    """The same samples the rank makes, rebuilt here for the reference."""
    rng = np.random.default_rng(1000 + r)
    x = rng.uniform(-1, 1, (SAMPLES, FEATURES))
    return x, x @ W_TRUE + 0.01 * rng.uniform(-1, 1, SAMPLES)


def reference_losses(ranks):
    """One process, one batch: the survivors' samples concatenated."""
    parts = [shard(r) for r in ranks]
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    w, losses = np.zeros(FEATURES), []
    for _ in range(STEPS):
        err = x @ w - y
        losses.append(float(np.mean(err * err)))
        w -= LR * (2 * x.T @ err / len(y))
    return losses


def run_job(n, victim, extra_env=None):
    uid = weft.get_unique_id()
    # The ranks load the library this process loaded (clean_env drops WEFT_LIBRARY).
    env = clean_env(WEFT_TIMEOUT="3", WEFT_LIBRARY=str(weft.library_path()), **(extra_env or {}))
    procs = [subprocess.Popen([PY, "-W", "error", "-c", RANK, bytes(uid).hex(), str(r), str(n), str(victim)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
    # Reap every rank as soon as it ends: an unreaped victim is a zombie, and a zombie's pid
    # still answers kill(pid, 0), the survivors' same-host liveness check.
    outs = [None] * n

    def collect(r):
        try:
            o, e = procs[r].communicate(timeout=90)
        except subprocess.TimeoutExpired:
            procs[r].kill()
            o, e = procs[r].communicate()
        outs[r] = (procs[r].returncode, o, e)

    threads = [threading.Thread(target=collect, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outs


def judge(outs, n, victim):
    """Every problem with a job's outcome: the victim must be killed, every survivor must exit 0,
    report the same member list (the survivors, in order) and the reference's losses."""
    problems = []
    survivors = [r for r in range(n) if r != victim]
    want = reference_losses(survivors)
    for r, (code, out, err) in enumerate(outs):
        if r == victim:
            if code != -9:
                problems.append("victim %d ended with %s" % (r, code))
            continue
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if code != 0 or not lines:
            problems.append("rank %d: exit %s: %s" % (r, code, err[-2000:]))
            continue
        res = json.loads(lines[-1])
        if "error" in res:
            problems.append("rank %d: %s" % (r, res["error"]))
            continue
        if res["members"] != survivors:
            problems.append("rank %d: members %s, expected %s" % (r, res["members"], survivors))
        if not np.allclose(res["losses"], want, rtol=RTOL, atol=0):
            problems.append("rank %d: losses %s differ from the reference %s" % (r, res["losses"][:3], want[:3]))
    return problems


@pytest.mark.parametrize("n,victim", [(3, 0), (4, 2)])
def test_train_on_after_kill(n, victim):
    problems = judge(run_job(n, victim), n, victim)
    assert not problems, "\n".join(problems)
    assert reference_losses([r for r in range(n) if r != victim])[-1] < 1e-2  # it did learn


def test_agreement_check_catches_a_dropped_member():
    # Rank 1 drops the last survivor from its result: judge must say so.
    problems = judge(run_job(3, 0, {"WEFT_TEST_SHRINK_DROP": "1"}), 3, 0)
    assert problems, "a survivor dropped a member, and the agreement check did not notice"
