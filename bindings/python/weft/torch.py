"""torch.distributed backend "weft".

``import weft.torch`` registers the backend; then ``torch.distributed.init_process_group("weft")``
(or ``new_group(backend="weft")``) runs collectives on CPU tensors through libweft.so.

How the backend gets its communicator (torch calls the creator with (store, rank, size, timeout)):

* Under weftrun (WEFT_RANK, WEFT_WORLD_SIZE, WEFT_MASTER_ADDR and WEFT_MASTER_PORT set) and for a
  group that is the whole world (rank == WEFT_RANK, size == WEFT_WORLD_SIZE): weft's own store,
  through ``weft.Comm.from_env()`` (weft_comm_init_from_env).
* Otherwise (plain torchrun-style env, or a subgroup): the group's rank 0 starts a weft store with
  ``weft.get_unique_id(port=0)`` (any free port; never torch's MASTER_PORT) and publishes the 128-byte
  unique id under the key "weft_unique_id" in the group's torch store (a PrefixStore, so every
  group has its own key); the other ranks read it and all call ``weft.Comm(uid, rank, size)``.
  Other hosts reach the store at WEFT_MASTER_ADDR when set, else at rank 0's host name.

The timeout given to init_process_group becomes the communicator's deadline for every blocking
wait, unless WEFT_TIMEOUT is set in the environment (then that wins).

Operations run in issue order on one worker thread per process group, which alone uses the
communicator; each method returns at once a Work carrying a ``torch.futures.Future`` that the
worker completes with the output tensors (or with the weft error, e.g. weft.Timeout). The C call
runs without the GIL (ctypes releases it), in place on the caller's tensor when it is contiguous
(DDP's buckets are). A worker outlives its group object until its queue is drained; at exit every
worker is stopped and joined before the interpreter shuts down (a worker still running then would
be killed inside torch's C++ code: "terminate called without an active exception").

WEFT_TORCH_PROFILE=1 makes every group record, per operation kind, how long operations waited in
the queue, ran (the weft call and its copies) and took to complete their futures, and the worker
thread's CPU time: ``ProcessGroupWeft.profile()`` returns the totals (bench/ddp_bench.py --profile
prints them per step).
"""

import atexit
import collections
import os
import queue
import threading
import time
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work

from . import _comm
from ._buffers import Buffer, DType
from ._errors import InvalidArgument, Unsupported

BACKEND_NAME = "weft"

_TORCH_DTYPES = {
    torch.float64: DType.FLOAT64, torch.float32: DType.FLOAT32, torch.float16: DType.FLOAT16,
    torch.bfloat16: DType.BFLOAT16, torch.int8: DType.INT8, torch.uint8: DType.UINT8,
    torch.int32: DType.INT32, torch.int64: DType.INT64,
}
for _name, _dt in (("uint32", DType.UINT32), ("uint64", DType.UINT64)):  # torch >= 2.3
    if hasattr(torch, _name):
        _TORCH_DTYPES[getattr(torch, _name)] = _dt

_RedOpType = dist.ReduceOp.RedOpType
_OPS = {_RedOpType.SUM: _comm.Op.SUM, _RedOpType.PRODUCT: _comm.Op.PROD, _RedOpType.MIN: _comm.Op.MIN,
        _RedOpType.MAX: _comm.Op.MAX}
if hasattr(_RedOpType, "AVG"):
    _OPS[_RedOpType.AVG] = _comm.Op.AVG


def weft_op(op):
    """weft.Op for a torch.distributed.ReduceOp (SUM, PRODUCT, MIN, MAX, AVG)."""
    kind = getattr(op, "op", op)
    try:
        return _OPS[kind]
    except (KeyError, TypeError):
        raise Unsupported("reduce op %s is not supported by the weft backend (it has SUM, PRODUCT, MIN, MAX%s)"
                          % (getattr(kind, "name", kind), ", AVG" if _RedOpType.AVG in _OPS else "")) from None


def _check_tensor(t, what, reduce=False):
    if not isinstance(t, torch.Tensor):
        raise InvalidArgument("%s: expected a torch.Tensor, got %s" % (what, type(t).__name__))
    if t.device.type != "cpu":
        raise Unsupported("%s is on %s; the weft backend takes CPU tensors in this release" % (what, t.device))
    if t.is_sparse:
        raise Unsupported("%s is sparse; the weft backend takes dense tensors" % what)
    if reduce and t.dtype not in _TORCH_DTYPES:
        raise Unsupported("%s has dtype %s, which weft cannot reduce (it reduces %s)"
                          % (what, t.dtype, ", ".join(str(d) for d in _TORCH_DTYPES)))


def _one(tensors, what, reduce=False):
    if len(tensors) != 1:
        raise InvalidArgument("%s: the weft backend takes exactly one tensor per process, got %d"
                              % (what, len(tensors)))
    _check_tensor(tensors[0], what, reduce)
    return tensors[0]


def _view(t):
    """A Buffer over a contiguous CPU tensor (untyped for dtypes weft lacks: moved as bytes)."""
    return Buffer(t.data_ptr(), t.numel() * t.element_size(), t.element_size(), _TORCH_DTYPES.get(t.dtype),
                  str(t.dtype), False, t)


def _contig(t):
    """(contiguous tensor to operate on, whether to copy it back into t afterwards)."""
    if t.is_contiguous():
        return t, False
    return t.contiguous(), True


def _flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.empty(0)


def _scatter_into(flat, outputs):
    off = 0
    for o in outputs:
        n = o.numel()
        o.copy_(flat[off:off + n].view(o.shape))
        off += n


class _Pins:
    """Keeps the Python half of Work objects alive while C++ may still call into them.

    A Work handed to C++ (DDP's reducer, _broadcast_coalesced) loses its Python overrides
    (wait, get_future) once the last Python reference goes, and the base C++ Work would then
    wait forever. So each Work stays here until its operation has completed and someone has
    called wait() or get_future() on it; completed Works nobody claimed stay among the last
    `recent` ones."""

    def __init__(self, recent=1024):
        self.lock = threading.Lock()
        self.live = set()
        self.recent = collections.deque(maxlen=recent)


class WeftWork(Work):
    """Work whose get_future() is completed by the process group's worker thread."""

    def __init__(self, future, pins):
        super().__init__()
        self._future = future
        self._pins = pins
        self._claimed = False
        self._done = False
        with pins.lock:
            pins.live.add(self)

    def _claim(self):
        with self._pins.lock:
            self._claimed = True
            if self._done:
                self._pins.live.discard(self)

    def _completed(self):
        with self._pins.lock:
            self._done = True
            self._pins.live.discard(self)
            if not self._claimed:
                self._pins.recent.append(self)

    def wait(self, timeout=None):
        """Blocks until done; raises the operation's error (e.g. weft.Timeout). Deadlines are
        the communicator's (init_process_group's timeout or WEFT_TIMEOUT)."""
        self._claim()
        self._future.wait()
        return True

    def get_future(self):
        self._claim()
        return self._future

    def is_completed(self):
        return self._future.done()

    def is_success(self):
        if not self._future.done():
            return False
        try:
            self._future.value()
        except Exception:
            return False
        return True

    def exception(self):
        if not self._future.done():
            return None
        try:
            self._future.value()
        except Exception as e:
            return e
        return None

    def result(self):
        value = self._future.wait()
        out = []
        for v in value if isinstance(value, list) else [value]:
            out.extend(v if isinstance(v, list) else [v])
        return out

    def synchronize(self):
        pass

    def source_rank(self):
        raise Unsupported("the weft backend has no receive from any source")


_STOP = object()

_PROFILE = os.environ.get("WEFT_TORCH_PROFILE", "") not in ("", "0")

OpProfile = collections.namedtuple("OpProfile", "count bytes queued ran completed worker_cpu")
OpProfile.__doc__ = ("Totals for one operation kind (WEFT_TORCH_PROFILE=1), times in seconds: queued (issue to the "
                     "worker taking it), ran (the weft call with its copies), completed (setting the future, which "
                     "runs its callbacks), worker_cpu (the worker thread's CPU time for these operations). count, bytes, "
                     "queued and ran include an operation once its wait() returns; completed and worker_cpu "
                     "may trail by that operation for a moment.")


class _Profile:
    """Per-group totals by operation kind; written by the worker, read by profile()."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = {}

    def add_ran(self, what, nbytes, queued, ran):
        """Before the future completes, so a caller whose wait() returned sees its operation counted."""
        with self.lock:
            c = self.ops.get(what) or [0, 0, 0.0, 0.0, 0.0, 0.0]
            c[0] += 1
            c[1] += nbytes
            c[2] += queued
            c[3] += ran
            self.ops[what] = c

    def add_completed(self, what, completed, cpu):
        """After the future completed (its callbacks ran): these two may trail the count by one op."""
        with self.lock:
            c = self.ops.get(what) or [0, 0, 0.0, 0.0, 0.0, 0.0]
            c[4] += completed
            c[5] += cpu
            self.ops[what] = c

    def snapshot(self, reset):
        with self.lock:
            out = {k: OpProfile(*v) for k, v in self.ops.items()}
            if reset:
                self.ops = {}
        return out


# Every worker thread that has not finished -> (its queue, its communicator): joined at exit even
# when its group object is gone (destroy_process_group drops the group; its __del__ only queues
# the stop and does not wait).
_workers_lock = threading.Lock()
_workers = {}


def _worker_loop(jobs, comm, profile):
    try:
        while True:
            item = jobs.get()
            if item is _STOP:
                break
            fn, future, work, what, nbytes, issued = item
            value = None
            if profile is not None:
                t1, c1 = time.perf_counter(), time.thread_time()
            error = None
            try:
                value = fn()
            except Exception as e:
                error = e
            if profile is not None:
                t2 = time.perf_counter()
                profile.add_ran(what, nbytes, t1 - issued, t2 - t1)
            if error is None:
                future.set_result(value)
            else:
                future.set_exception(error)
            work._completed()
            if profile is not None:
                profile.add_completed(what, time.perf_counter() - t2, time.thread_time() - c1)
            del item, fn, future, work, value, error
    finally:
        try:
            comm.close()
        finally:
            with _workers_lock:
                _workers.pop(threading.current_thread(), None)


_live_groups = weakref.WeakSet()


class ProcessGroupWeft(ProcessGroup):
    """torch.distributed.ProcessGroup over a weft.Comm (see the module doc)."""

    def __init__(self, comm, rank=None, size=None):
        rank = comm.rank if rank is None else rank
        size = comm.size if size is None else size
        if (rank, size) != (comm.rank, comm.size):
            raise InvalidArgument("process group rank %d of %d, but the weft communicator is rank %d of %d"
                                  % (rank, size, comm.rank, comm.size))
        super().__init__(rank, size)
        self._comm = comm
        self._pins = _Pins()
        self._jobs = queue.SimpleQueue()
        self._stopped = False
        self._profile = _Profile() if _PROFILE else None
        self._thread = threading.Thread(target=_worker_loop, args=(self._jobs, comm, self._profile), daemon=True,
                                        name="weft-pg-%d" % rank)
        with _workers_lock:
            _workers[self._thread] = (self._jobs, comm)
        self._thread.start()
        _live_groups.add(self)

    @property
    def comm(self):
        """The weft.Comm (used by the worker thread; abort() is safe from any thread)."""
        return self._comm

    def getBackendName(self):  # noqa: N802 (the name c10d's C++ trampoline looks up)
        return BACKEND_NAME

    def abort(self):
        """weft_comm_abort(): pending and later operations fail with weft.Aborted."""
        self._comm.abort()

    def shutdown(self, wait=True, timeout=None):
        """Lets queued operations finish, stops the worker and closes the communicator."""
        if not self._stopped:
            self._stopped = True
            self._jobs.put(_STOP)
        if wait and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __del__(self):
        try:
            self.shutdown(wait=False)
        except Exception:
            pass

    def profile(self, reset=False):
        """{operation kind: OpProfile} since the start (or the last reset=True); empty unless
        WEFT_TORCH_PROFILE=1 was set when the group was made."""
        return self._profile.snapshot(reset) if self._profile is not None else {}

    def _submit(self, fn, what, tensors=()):
        if self._stopped:
            raise InvalidArgument("the weft process group has been shut down")
        future = torch.futures.Future()
        work = WeftWork(future, self._pins)
        if self._profile is not None:
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            self._jobs.put((fn, future, work, what, nbytes, time.perf_counter()))
        else:
            self._jobs.put((fn, future, work, what, 0, 0.0))
        return work

    # ------------------------------------------------------------ collectives

    def allreduce(self, tensors, opts=None):
        op = weft_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        t = _one(tensors, "allreduce", reduce=True)
        comm = self._comm

        def run():
            c, back = _contig(t)
            comm.allreduce(_view(c), op=op)
            if back:
                t.copy_(c)
            return tensors
        return self._submit(run, "allreduce", [t])

    def allreduce_coalesced(self, tensors, opts=None):
        op = weft_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        for i, t in enumerate(tensors):
            _check_tensor(t, "allreduce_coalesced tensor %d" % i, reduce=True)
        comm = self._comm

        def run():
            for t in tensors:
                c, back = _contig(t)
                comm.allreduce(_view(c), op=op)
                if back:
                    t.copy_(c)
            return tensors
        return self._submit(run, "allreduce_coalesced", tensors)

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        t = _one(tensors, "broadcast")
        comm = self._comm

        def run():
            c, back = _contig(t)
            comm.broadcast(_view(c), root=root)
            if back:
                t.copy_(c)
            return tensors
        return self._submit(run, "broadcast", [t])

    def reduce(self, tensors, opts=None):
        op = weft_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        root = opts.rootRank if opts is not None else 0
        t = _one(tensors, "reduce", reduce=True)
        comm = self._comm

        def run():
            c, back = _contig(t)
            comm.reduce(_view(c), None, op=op, root=root)
            if back and comm.rank == root:
                t.copy_(c)
            return tensors
        return self._submit(run, "reduce", [t])

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "allgather input")
        if len(output_tensors) != 1 or len(output_tensors[0]) != self.size():
            raise InvalidArgument("allgather: expected one output list of %d tensors" % self.size())
        outs = output_tensors[0]
        for i, o in enumerate(outs):
            _check_tensor(o, "allgather output %d" % i)
            if o.numel() != t.numel() or o.dtype != t.dtype:
                raise InvalidArgument("allgather output %d is %s x %d; expected %s x %d like the input"
                                      % (i, o.dtype, o.numel(), t.dtype, t.numel()))
        comm, size = self._comm, self.size()

        def run():
            c, _ = _contig(t)
            flat = torch.empty(size * c.numel(), dtype=c.dtype)
            comm.allgather(_view(c), _view(flat))
            _scatter_into(flat, outs)
            return output_tensors
        return self._submit(run, "allgather", outs)

    def _allgather_base(self, output, input, opts=None):
        _check_tensor(input, "all_gather_into_tensor input")
        _check_tensor(output, "all_gather_into_tensor output")
        if output.numel() != self.size() * input.numel() or output.dtype != input.dtype:
            raise InvalidArgument("all_gather_into_tensor: output is %s x %d; expected %s x %d (size x input)"
                                  % (output.dtype, output.numel(), input.dtype, self.size() * input.numel()))
        comm = self._comm

        def run():
            ic, _ = _contig(input)
            oc, back = _contig(output)
            comm.allgather(_view(ic), _view(oc))
            if back:
                output.copy_(oc)
            return [output]
        return self._submit(run, "allgather", [output])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = weft_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        out = _one(output_tensors, "reduce_scatter output", reduce=True)
        if len(input_tensors) != 1 or len(input_tensors[0]) != self.size():
            raise InvalidArgument("reduce_scatter: expected one input list of %d tensors" % self.size())
        ins = input_tensors[0]
        for i, x in enumerate(ins):
            _check_tensor(x, "reduce_scatter input %d" % i)
            if x.numel() != out.numel() or x.dtype != out.dtype:
                raise InvalidArgument("reduce_scatter input %d is %s x %d; expected %s x %d like the output"
                                      % (i, x.dtype, x.numel(), out.dtype, out.numel()))
        comm = self._comm

        def run():
            send = _flat(ins)
            oc, back = _contig(out)
            comm.reduce_scatter(_view(send), _view(oc), op=op)
            if back:
                out.copy_(oc)
            return output_tensors
        return self._submit(run, "reduce_scatter", ins)

    def _reduce_scatter_base(self, output, input, opts=None):
        op = weft_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        _check_tensor(input, "reduce_scatter_tensor input", reduce=True)
        _check_tensor(output, "reduce_scatter_tensor output", reduce=True)
        if input.numel() != self.size() * output.numel() or output.dtype != input.dtype:
            raise InvalidArgument("reduce_scatter_tensor: input is %s x %d; expected %s x %d (size x output)"
                                  % (input.dtype, input.numel(), output.dtype, self.size() * output.numel()))
        comm = self._comm

        def run():
            ic, _ = _contig(input)
            oc, back = _contig(output)
            comm.reduce_scatter(_view(ic), _view(oc), op=op)
            if back:
                output.copy_(oc)
            return [output]
        return self._submit(run, "reduce_scatter", [input])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        _check_tensor(input, "all_to_all_single input")
        _check_tensor(output, "all_to_all_single output")
        if input.dtype != output.dtype:
            raise InvalidArgument("all_to_all_single: input is %s, output %s" % (input.dtype, output.dtype))
        scounts = self._split_counts(input, input_split_sizes, "input")
        rcounts = self._split_counts(output, output_split_sizes, "output")
        if sum(scounts) > input.numel() or sum(rcounts) > output.numel():
            raise InvalidArgument("all_to_all_single: split sizes exceed the tensors' first dimension")
        comm = self._comm
        equal = not output_split_sizes and not input_split_sizes

        def run():
            ic, _ = _contig(input)
            oc, back = _contig(output)
            if equal:
                comm.alltoall(_view(ic), _view(oc))
            else:
                comm.alltoallv(_view(ic), scounts, _view(oc), rcounts)
            if back:
                output.copy_(oc)
            return [output]
        return self._submit(run, "alltoall", [input])

    def _split_counts(self, t, splits, what):
        n = self.size()
        if t.dim() == 0:
            raise InvalidArgument("all_to_all_single %s must have at least one dimension" % what)
        row = t.numel() // t.shape[0] if t.shape[0] else 0
        if not splits:
            if t.shape[0] % n:
                raise InvalidArgument("all_to_all_single %s: first dimension %d does not split into %d equal parts"
                                      % (what, t.shape[0], n))
            return [t.shape[0] // n * row] * n
        if len(splits) != n:
            raise InvalidArgument("all_to_all_single %s_split_sizes has %d entries; expected %d"
                                  % (what, len(splits), n))
        return [int(s) * row for s in splits]

    def alltoall(self, output_tensors, input_tensors, opts=None):
        n = self.size()
        if len(output_tensors) != n or len(input_tensors) != n:
            raise InvalidArgument("all_to_all: expected %d input and %d output tensors, got %d and %d"
                                  % (n, n, len(input_tensors), len(output_tensors)))
        for i, t in enumerate(list(input_tensors) + list(output_tensors)):
            _check_tensor(t, "all_to_all tensor %d" % i)
            if t.dtype != input_tensors[0].dtype:
                raise InvalidArgument("all_to_all: tensors have different dtypes (%s, %s)"
                                      % (input_tensors[0].dtype, t.dtype))
        comm = self._comm

        def run():
            send = _flat(input_tensors).to(input_tensors[0].dtype)
            recv = torch.empty(sum(o.numel() for o in output_tensors), dtype=output_tensors[0].dtype)
            comm.alltoallv(_view(send), [t.numel() for t in input_tensors], _view(recv),
                           [o.numel() for o in output_tensors])
            _scatter_into(recv, output_tensors)
            return output_tensors
        return self._submit(run, "alltoall", input_tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        t = _one(input_tensors, "gather input")
        is_root = self.rank() == root
        outs = None
        if is_root:
            if len(output_tensors) != 1 or len(output_tensors[0]) != self.size():
                raise InvalidArgument("gather: the root needs one output list of %d tensors" % self.size())
            outs = output_tensors[0]
            for i, o in enumerate(outs):
                _check_tensor(o, "gather output %d" % i)
                if o.numel() != t.numel() or o.dtype != t.dtype:
                    raise InvalidArgument("gather output %d is %s x %d; expected %s x %d like the input"
                                          % (i, o.dtype, o.numel(), t.dtype, t.numel()))
        comm, size = self._comm, self.size()

        def run():
            c, _ = _contig(t)
            if is_root:
                flat = torch.empty(size * c.numel(), dtype=c.dtype)
                comm.gather(_view(c), _view(flat), root=root)
                _scatter_into(flat, outs)
            else:
                comm.gather(_view(c), None, root=root)
            return output_tensors
        return self._submit(run, "gather", [t])

    def scatter(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        out = _one(output_tensors, "scatter output")
        is_root = self.rank() == root
        ins = None
        if is_root:
            if len(input_tensors) != 1 or len(input_tensors[0]) != self.size():
                raise InvalidArgument("scatter: the root needs one input list of %d tensors" % self.size())
            ins = input_tensors[0]
            for i, x in enumerate(ins):
                _check_tensor(x, "scatter input %d" % i)
                if x.numel() != out.numel() or x.dtype != out.dtype:
                    raise InvalidArgument("scatter input %d is %s x %d; expected %s x %d like the output"
                                          % (i, x.dtype, x.numel(), out.dtype, out.numel()))
        comm = self._comm

        def run():
            oc, back = _contig(out)
            send = _view(_flat(ins).to(out.dtype)) if is_root else None
            comm.scatter(send, _view(oc), root=root)
            if back:
                out.copy_(oc)
            return output_tensors
        return self._submit(run, "scatter", [out])

    def barrier(self, opts=None):
        comm = self._comm

        def run():
            comm.barrier()
            return []
        return self._submit(run, "barrier", ())

    # ------------------------------------------------------------ point-to-point

    @staticmethod
    def _check_tag(tag):
        if tag:
            raise Unsupported("tag=%d: weft matches messages between two ranks in issue order and has no tags; "
                              "use tag 0" % tag)

    def send(self, tensors, dstRank, tag=0):  # noqa: N803 (c10d's names)
        self._check_tag(tag)
        t = _one(tensors, "send")
        comm = self._comm

        def run():
            c, _ = _contig(t)
            comm.send(_view(c), dstRank)
            return tensors
        return self._submit(run, "send", [t])

    def recv(self, tensors, srcRank, tag=0):  # noqa: N803
        self._check_tag(tag)
        t = _one(tensors, "recv")
        comm = self._comm

        def run():
            c, back = _contig(t)
            comm.recv(_view(c), srcRank)
            if back:
                t.copy_(c)
            return tensors
        return self._submit(run, "recv", [t])

    def recv_anysource(self, tensors, tag=0):
        raise Unsupported("the weft backend cannot receive from any source; pass src= to recv")


# ---------------------------------------------------------------- the backend's creator

UNIQUE_ID_KEY = "weft_unique_id"


def _from_weftrun(rank, size):
    env = os.environ
    if not all(env.get(k) for k in ("WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_MASTER_ADDR", "WEFT_MASTER_PORT")):
        return False
    try:
        return int(env["WEFT_RANK"]) == rank and int(env["WEFT_WORLD_SIZE"]) == size
    except ValueError:
        return False


def make_comm(store, rank, size, timeout=None):
    """The weft.Comm for a torch process group (see the module doc for the two ways)."""
    if _from_weftrun(rank, size):
        return _comm.Comm.from_env(timeout=timeout, name="torch")
    if rank == 0:
        uid = _comm.get_unique_id(port=0)
        store.set(UNIQUE_ID_KEY, bytes(uid))
    else:
        uid = _comm.UniqueId(store.get(UNIQUE_ID_KEY))
    return _comm.Comm(uid, rank, size, timeout=timeout, name="torch")


def create_process_group(store, rank, size, timeout):
    """The creator registered with torch.distributed.Backend.register_backend."""
    deadline = None if os.environ.get("WEFT_TIMEOUT") else timeout
    return ProcessGroupWeft(make_comm(store, rank, size, deadline), rank, size)


def _register():
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, create_process_group)


_register()


@atexit.register
def _shutdown_all(timeout=30):
    """Stops and joins every worker before the interpreter finalizes: a daemon thread still in
    Python then is killed with pthread_exit, which aborts the process when it unwinds through
    torch's C++ frames ("terminate called without an active exception"). A worker stuck in a
    collective past `timeout` seconds gets its communicator aborted, then a few more seconds."""
    for pg in list(_live_groups):
        try:
            pg.shutdown(wait=False)
        except Exception:
            pass
    with _workers_lock:
        workers = [(t, jobs, comm) for t, (jobs, comm) in _workers.items() if t is not threading.current_thread()]
    for _, jobs, _ in workers:
        jobs.put(_STOP)  # a second stop after the group's own is never read
    deadline = time.monotonic() + timeout
    for thread, _, _ in workers:
        thread.join(max(0.0, deadline - time.monotonic()))
    for thread, _, comm in workers:
        if thread.is_alive():
            try:
                comm.abort()
                thread.join(5)
            except Exception:
                pass


# Tensor, sequence and context parallelism on weft's meshes (weft/training.h): the region
# autograd Functions, ring exchange and ring attention, also reachable as weft.torch.<name>.
from . import torch_parallel  # noqa: E402

for _name in torch_parallel.__all__:
    globals()[_name] = getattr(torch_parallel, _name)
del _name
