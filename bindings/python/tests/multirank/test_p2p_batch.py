"""Comm.p2p_batch (weft_p2p_batch): two-way ring exchanges, all-to-all by hand, the rank
itself, matching with plain send/recv, requests, and the error messages naming ops[i]."""

import numpy as np
import pytest

import weft


def _ring(world):
    return (world.rank + 1) % world.size, (world.rank - 1) % world.size


def test_ring_both_directions(world):
    right, left = _ring(world)
    for n in (0, 1, 1000, 100000):
        to_right = np.arange(n, dtype=np.float64) + 1000 * world.rank
        to_left = -to_right
        from_left, from_right = np.zeros(n), np.zeros(n)
        world.p2p_batch([weft.P2POp.send(to_right, right), weft.P2POp.send(to_left, left),
                         weft.P2POp.recv(from_left, left), weft.P2POp.recv(from_right, right)])
        np.testing.assert_array_equal(from_left, np.arange(n, dtype=np.float64) + 1000 * left)
        np.testing.assert_array_equal(from_right, -(np.arange(n, dtype=np.float64) + 1000 * right))


def test_alltoall_with_tuples_async(world):
    def count(i, j):
        return (i + 2 * j) % 3 * 5

    ops, inbox = [], []
    for p in range(world.size):
        ops.append(("send", np.full(count(world.rank, p), world.rank * 100 + p, np.int32), p))
        buf = np.zeros(count(p, world.rank), np.int32)
        inbox.append(buf)
        ops.append(("recv", buf, p))
    req = world.p2p_batch(ops, async_op=True)
    assert req.wait() is None
    for p, buf in enumerate(inbox):
        assert (buf == p * 100 + world.rank).all()


def test_matches_plain_send_recv(world):
    right, left = _ring(world)
    a = np.full(7, world.rank, np.uint16)
    got = np.zeros(7, np.uint16)
    req = world.p2p_batch([weft.P2POp.send(a, right)], async_op=True)
    world.recv(got, left)
    req.wait()
    assert (got == left).all()
    req = world.send(a, right, async_op=True)
    got[:] = 0
    world.p2p_batch([weft.P2POp.recv(got, left)])
    req.wait()
    assert (got == left).all()


def test_self_and_empty(world):
    out, back = np.arange(9, dtype=np.int64), np.zeros(9, np.int64)
    world.p2p_batch([weft.P2POp.recv(back, world.rank), weft.P2POp.send(out, world.rank)])
    np.testing.assert_array_equal(back, out)
    world.p2p_batch([])
    world.p2p_batch([], async_op=True).wait()


def test_errors_name_the_op(world):
    x = np.zeros(4, np.float32)
    with pytest.raises(weft.InvalidArgument, match=r"ops\[1\]\.peer"):
        world.p2p_batch([weft.P2POp.send(x, world.rank), weft.P2POp.recv(x.copy(), world.size)])
    with pytest.raises(weft.InvalidArgument, match="overlap"):
        world.p2p_batch([weft.P2POp.send(x, world.rank), weft.P2POp.recv(x, world.rank)])
    with pytest.raises(weft.InvalidArgument, match="kind"):
        weft.P2POp("sendrecv", x, 0)
    with pytest.raises((ValueError, TypeError)):  # read-only receive buffer
        world.p2p_batch([weft.P2POp.recv(bytes(4), world.rank)])
    world.barrier()  # the communicator still works
