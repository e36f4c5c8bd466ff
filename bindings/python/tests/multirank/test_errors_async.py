"""Status codes as exceptions (with weft_last_error()'s words), the binding's own checks,
abort, timeouts, mismatches, and asynchronous requests."""

import threading
import time

import numpy as np
import pytest

import weft


# ------------------------------------------------------------------ argument errors

def test_bad_root_is_invalid_argument_with_message(world):
    x = np.zeros(4, dtype=np.float32)
    with pytest.raises(weft.InvalidArgument) as e:
        world.broadcast(x, root=world.size)
    assert e.value.status == weft.Status.INVALID_ARGUMENT
    assert "root" in e.value.message and str(world.size) in e.value.message
    assert "weft_broadcast" in e.value.message
    with pytest.raises(weft.InvalidArgument, match="root"):
        world.reduce(x, x, root=-1)
    with pytest.raises(ValueError):  # InvalidArgument is a ValueError too
        world.gather(x, None, root=world.size + 3)
    world.barrier()  # argument errors leave the communicator usable
    world.allreduce(x)


def test_binding_checks(world):
    s = world.size
    f32 = np.zeros(4, dtype=np.float32)
    with pytest.raises(weft.InvalidArgument, match="needs at least"):
        world.allgather(f32, np.zeros(4 * s - 1, dtype=np.float32))
    with pytest.raises(weft.InvalidArgument, match="same dtype"):
        world.allreduce(f32, np.zeros(4, dtype=np.float64))
    ro = np.zeros(4, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(weft.InvalidArgument, match="read-only"):
        world.allreduce(ro)
    with pytest.raises(weft.InvalidArgument, match="read-only"):
        world.allreduce(f32, ro)
    with pytest.raises(weft.InvalidArgument, match="read-only"):
        world.recv(bytes(4), 0)
    with pytest.raises(weft.InvalidArgument, match="contiguous"):
        world.allreduce(np.zeros((4, 4), dtype=np.float32)[:, 1])
    with pytest.raises(weft.InvalidArgument, match="neither a buffer"):
        world.allreduce([1.0, 2.0])
    with pytest.raises(weft.InvalidArgument, match="op="):
        world.allreduce(f32, op="bogus")
    with pytest.raises(weft.InvalidArgument, match="cannot reinterpret"):
        world.allreduce(f32, dtype="float64")
    with pytest.raises(weft.InvalidArgument, match="one per rank"):
        world.allgatherv(f32, np.zeros(16, np.float32), [1] * (s + 1))
    with pytest.raises(weft.Unsupported, match="cannot reduce"):
        world.allreduce(np.zeros(3, dtype=np.int16))
    with pytest.raises(weft.InvalidArgument, match="Python objects"):
        world.broadcast(np.zeros(3, dtype=object))
    world.allreduce(ro.copy())  # still usable
    world.allreduce(f32, np.zeros(4, dtype=np.float32))  # read-only sendbuf is fine


# ------------------------------------------------------------------ abort, timeout, mismatch

def test_abort_unblocks_a_pending_call(world):
    comm = world.dup()
    timer = threading.Timer(0.3, comm.abort)  # from another thread, while recv blocks
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(weft.Aborted) as e:
        comm.recv(np.zeros(1, np.float32), (comm.rank + 1) % comm.size)  # nobody sends
    assert time.monotonic() - t0 < 30
    assert e.value.status == weft.Status.ABORTED and e.value.message
    with pytest.raises(weft.Aborted):  # later calls too
        comm.barrier()
    timer.join()
    comm.close()
    world.barrier()


def test_abort_before_a_call(world):
    comm = world.dup()
    comm.abort()
    with pytest.raises(weft.Aborted):
        comm.allreduce(np.ones(3))
    req = None
    with pytest.raises(weft.Aborted):
        req = comm.barrier(async_op=True)
    assert req is None
    comm.close()
    comm.close()  # idempotent
    with pytest.raises(weft.InvalidArgument, match="closed"):
        comm.barrier()
    world.barrier()


def test_timeout(world):
    comm = world.split(0, world.rank, timeout=0.5)
    assert comm.size == world.size
    if comm.rank == 0 and comm.size > 1:
        t0 = time.monotonic()
        with pytest.raises(weft.Timeout) as e:
            comm.recv(np.zeros(2, np.float32), 1)  # rank 1 never sends
        took = time.monotonic() - t0
        assert 0.3 < took < 20, took
        assert e.value.status == weft.Status.TIMEOUT and e.value.message
    world.barrier()  # the others wait here meanwhile
    comm.close()


def test_point_to_point_count_mismatch(world):
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    comm = world.dup()
    if comm.rank == 0:
        comm.send(np.zeros(4, np.float32), 1)
    elif comm.rank == 1:
        with pytest.raises(weft.Mismatch) as e:
            comm.recv(np.zeros(3, np.float32), 0)
        assert e.value.message
    world.barrier()
    comm.close()


def test_check_mode_mismatch(world):
    if world.size < 2:
        pytest.skip("needs 2 ranks")
    comm = world.split(0, world.rank, check=True, timeout=20)
    with pytest.raises(weft.Mismatch) as e:
        comm.allreduce(np.zeros(3 + (comm.rank == 1), np.float32))
    assert "count" in e.value.message.lower()
    world.barrier()
    comm.close()


def test_split_and_dup(world):
    sub = world.split(world.rank % 2, key=-world.rank)
    members = [r for r in range(world.size) if r % 2 == world.rank % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(world.rank)  # ordered by key
    x = np.array([world.rank], dtype=np.int64)
    sub.allreduce(x)
    assert x[0] == sum(members)
    sub.close()
    assert world.split(weft.SPLIT_NOCOLOR if world.rank == 0 else 1) is None or world.rank != 0
    with world.dup() as d:
        assert (d.rank, d.size, d.local_size) == (world.rank, world.size, world.local_size)
        assert 0 <= d.local_rank < d.local_size
    assert d.closed


# ------------------------------------------------------------------ asynchronous requests

def test_async_requests(world):
    s = world.size
    a = np.full(1000, world.rank + 1, dtype=np.float64)
    g = np.zeros(4 * s, dtype=np.int32)
    r1 = world.allreduce(a, async_op=True)
    r2 = world.allgather(np.full(4, world.rank, np.int32), g, async_op=True)  # temporary sendbuf kept alive
    r3 = world.barrier(async_op=True)
    assert isinstance(r1, weft.Request)
    results = weft.wait_all([r1, r2, r3])
    assert results[0] is a and results[1] is g and results[2] is None
    assert np.all(a == sum(range(1, s + 1)))
    assert list(g) == [r for r in range(s) for _ in range(4)]
    assert r1.done and r1.test() and r1.wait() is a  # waiting again is harmless


def test_async_test_polling(world):
    x = np.full(100_000, 1.0, dtype=np.float32)
    req = world.allreduce(x, async_op=True)
    polls = 0
    while not req.test():
        polls += 1
        time.sleep(0.001)
    assert req.done and np.all(x == world.size)
    # requests complete in issue order; dropping one waits for it
    reqs = [world.allreduce(np.ones(10), async_op=True) for _ in range(5)]
    del reqs
    world.barrier()


def test_async_error_surfaces_on_wait(world):
    comm = world.dup()
    req = comm.recv(np.zeros(1, np.float32), (comm.rank + 1) % comm.size, async_op=True)
    comm.abort()
    with pytest.raises(weft.Aborted):
        req.wait()
    with pytest.raises(weft.Aborted):  # the error stays with the request
        req.test()
    comm.close()
    world.barrier()


def test_request_keeps_bytearray_exported(world):
    buf = bytearray(8)
    req = world.allreduce(buf, async_op=True)
    with pytest.raises(BufferError):
        buf.append(1)  # exported while the operation may still be running
    req.wait()
    buf.append(1)  # released on completion
