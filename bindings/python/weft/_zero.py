"""ZeRO stages 0-3 with a fused optimizer (weft/training.h): weft.Zero and the optimizer
settings weft.SGD, weft.Adam, weft.AdamW."""

from __future__ import annotations

import ctypes
import os
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _errors, _lib
from ._buffers import DType, as_dtype
from ._comm import BufferLike, DTypeLike, OpLike, Request
from ._errors import InvalidArgument
from ._handle import Handle
from ._mesh import Mesh, MeshDim
from ._sharded import _is_torch, _view
from ._training import WireLike, _items, _live, _memory_view, _names_array, _sum_or_avg, _tensor_views, as_wire

_SGD, _ADAM, _ADAMW = 0, 1, 2  # weft_optimizer_kind_t


class _Optimizer:
    kind = None

    def _c(self):
        return _lib.weft_optimizer_config_t(ctypes.sizeof(_lib.weft_optimizer_config_t), self.kind, self.lr,
                                            getattr(self, "momentum", 0.0), self.betas[0], self.betas[1], self.eps,
                                            self.weight_decay)

    def __repr__(self):
        fields = ", ".join("%s=%r" % (k, getattr(self, k)) for k in self._fields)
        return "weft.%s(%s)" % (type(self).__name__, fields)

    def __eq__(self, other):
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in self._fields)

    __hash__ = None


class SGD(_Optimizer):
    """torch.optim.SGD's arithmetic (dampening 0, weight decay added to the gradient), in float32."""

    kind = _SGD
    _fields = ("lr", "momentum", "weight_decay")
    betas, eps = (0.9, 0.999), 1e-8  # unused by SGD; the C struct has them

    def __init__(self, lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        self.lr, self.momentum, self.weight_decay = float(lr), float(momentum), float(weight_decay)


class Adam(_Optimizer):
    """torch.optim.Adam's arithmetic (L2 weight decay added to the gradient), in float32."""

    kind = _ADAM
    _fields = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        self.lr, self.eps, self.weight_decay = float(lr), float(eps), float(weight_decay)
        self.betas = (float(betas[0]), float(betas[1]))


class AdamW(Adam):
    """torch.optim.AdamW's arithmetic (decoupled weight decay), in float32."""

    kind = _ADAMW

    def __init__(self, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        super().__init__(lr, betas, eps, weight_decay)


class StepInfo(NamedTuple):
    """weft_zero_step_info_t: skipped (an inf/NaN gradient on some rank: nothing changed), the
    global L2 norm of the unscaled gradient before clipping, the loss scale for the next step,
    and the elements and wire bytes this rank's collectives moved since the last step."""

    skipped: bool
    grad_norm: float
    loss_scale: float
    comm_elements: int
    comm_bytes: int


class ZeroMemory(NamedTuple):
    """weft_zero_memory_t: bytes weft holds for this rank: parameters (full or shard), gradients,
    float32 master weights and optimizer state, communication buffers now and at their peak."""

    params: int
    grads: int
    optimizer: int
    buffers: int
    buffers_peak: int


# Optimizer settings Zero takes.
Optimizer = Union[SGD, Adam, AdamW]
# A parameter's registration index or its name.
ParamRef = Union[int, str]


class Zero(Handle):
    """ZeRO over the mesh dim `dp_dim` of `mesh` (weft_zero_t): weft holds the parameters,
    gradients, optimizer state and master weights as flat buffers and runs the optimizer.

        zero = weft.Zero(mesh, "dp", [w1, b1, w2, b2], stage=2, optimizer=weft.AdamW(lr=1e-3))
        for step ...:
            zero.gather(g) / zero.release(g)      # stage 3 only (prefetch: async_op=True)
            w = [zero.param(i) for i in range(4)] # read-only views for forward and backward
            ... backward; for each gradient, last layer first: zero.grad_ready(i, grad)
            info = zero.step()

    Collective over the mesh's members (every other mesh dim keeps its own copy). `params`: a
    list (or dict {name: array}) of contiguous numpy arrays or CPU torch tensors holding the
    initial values, float32 or param_dtype (read during the call; dp coordinate 0's values are
    broadcast). param_dtype "float32", "bfloat16" or "float16": what weft holds (with float32
    master weights for the half types). optimizer: weft.AdamW(...), weft.Adam(...) or
    weft.SGD(...). groups (a group index per parameter, 0, 1, ... non-decreasing) or group_bytes
    (None = 25 MiB) make the flat groups (FSDP units). grad_op "avg"/"sum" over dp; wire "native",
    "bf16", "fp8_e4m3" (float32 parameters); max_grad_norm (0 = no clipping); loss_scale and
    dynamic_loss_scale with growth/backoff/growth_interval (torch.amp.GradScaler's rule).

    Views: param(i) is a numpy array over weft's memory (read-only; bfloat16/float16 as uint16 /
    float16 storage), or with like="torch" a torch tensor over it (torch.bfloat16 for bfloat16;
    torch cannot mark it read-only: do not write it). Valid until the next step() (stages 0-2)
    or, at stage 3, while its group is gathered. One thread at a time; calls are serialised with
    the mesh's other calls. close() (also `with`, collection and exit) frees it."""

    def __init__(self, mesh: Mesh, dp_dim: MeshDim, params: Union[Sequence[BufferLike], Mapping[str, BufferLike]],
                 stage: int = 2, param_dtype: DTypeLike = "float32", optimizer: Optional[Optimizer] = None,
                 groups: Optional[Sequence[int]] = None, group_bytes: Optional[int] = None,
                 names: Optional[Sequence[str]] = None, grad_op: OpLike = "avg", wire: WireLike = "native",
                 max_grad_norm: float = 0.0, loss_scale: float = 1.0, dynamic_loss_scale: bool = False,
                 growth: float = 2.0, backoff: float = 0.5, growth_interval: int = 2000,
                 error_feedback: bool = False) -> None:
        self._handle = None
        if not isinstance(mesh, Mesh):
            raise InvalidArgument("Zero(mesh=...): expected a weft.Mesh, got %r" % (mesh,))
        arrays, dict_names = _items(params, "Zero(params=...)")
        if not arrays:
            raise InvalidArgument("Zero: no parameters given; expected at least one")
        if names is None:
            names = dict_names
        self._mesh = mesh
        self._dp_dim = str(dp_dim)
        self._param_dtype = as_dtype(param_dtype)
        self._stage = int(stage)
        self._optimizer = AdamW() if optimizer is None else optimizer
        if not isinstance(self._optimizer, _Optimizer):
            raise InvalidArgument("Zero(optimizer=%r): expected weft.SGD(...), weft.Adam(...) or weft.AdamW(...)"
                                  % (optimizer,))
        # Integer storage (bfloat16 in uint16) is read as param_dtype; float arrays as what they are.
        views, c_params = _tensor_views(arrays, "params", lambda a: self._storage_dtype(a))
        self._shapes = [v.shape for v in views]
        self._names, c_names = _names_array(names, len(arrays), "Zero(names=...)")
        c_groups = None
        if groups is not None:
            groups = [int(g) for g in groups]
            if len(groups) != len(arrays):
                raise InvalidArgument("Zero(groups=...): %d entries for %d parameters" % (len(groups), len(arrays)))
            c_groups = (ctypes.c_int * len(groups))(*groups)
        cfg = _lib.weft_zero_config_t(
            ctypes.sizeof(_lib.weft_zero_config_t), self._stage, int(self._param_dtype), self._optimizer._c(),
            ctypes.cast(c_groups, ctypes.POINTER(ctypes.c_int)) if c_groups is not None else None,
            0 if group_bytes is None else int(group_bytes),
            ctypes.cast(c_names, ctypes.POINTER(ctypes.c_char_p)) if c_names is not None else None,
            int(_sum_or_avg(grad_op, "grad_op")), int(as_wire(wire)), float(max_grad_norm), float(loss_scale),
            1 if dynamic_loss_scale else 0, float(growth), float(backoff), int(growth_interval),
            1 if error_feedback else 0)
        out = ctypes.c_void_p()
        with mesh._lock:
            _errors.check(_lib.fn("weft_zero_create")(mesh._h(), self._dp_dim.encode("utf-8"), c_params, len(arrays),
                                                      ctypes.byref(cfg), ctypes.byref(out)))
        del views  # the initial values were read during the call
        self._handle = out.value
        n = ctypes.c_size_t()
        _errors.check(_lib.fn("weft_zero_num_groups")(self._handle, ctypes.byref(n)))
        self._ngroups = n.value
        _live.add(self)

    def _storage_dtype(self, a):
        if _is_torch(a):
            return None if (a.dtype.is_floating_point or a.dtype.is_complex) else self._param_dtype
        kind = getattr(a, "__array_interface__", {}).get("typestr", "  ")[1]
        return self._param_dtype if kind in "iu" else None

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the ZeRO handle is closed")
        return h

    def _index(self, param):
        if isinstance(param, str):
            if self._names is None or param not in self._names:
                raise InvalidArgument("no parameter is named %r" % (param,))
            return self._names.index(param)
        i = int(param)
        if not 0 <= i < len(self._shapes):
            raise InvalidArgument("parameter %d: the ZeRO handle has %d parameters" % (i, len(self._shapes)))
        return i

    # -------------------------------------------------------------- queries

    @property
    def mesh(self) -> Mesh:
        """The mesh given."""
        return self._mesh

    @property
    def stage(self) -> int:
        """The ZeRO stage, 0..3."""
        return self._stage

    @property
    def param_dtype(self) -> DType:
        """What weft holds the parameters as."""
        return self._param_dtype

    @property
    def optimizer(self) -> Optimizer:
        """The optimizer settings (weft.AdamW() when none were given)."""
        return self._optimizer

    @property
    def num_params(self) -> int:
        """Number of parameters registered."""
        return len(self._shapes)

    @property
    def shapes(self) -> Tuple[Tuple[int, ...], ...]:
        """Each parameter's shape, in registration order."""
        return tuple(self._shapes)

    @property
    def names(self) -> Optional[Tuple[str, ...]]:
        """The parameters' names, or None when none were given."""
        return tuple(self._names) if self._names is not None else None

    @property
    def num_groups(self) -> int:
        """weft_zero_num_groups()."""
        return self._ngroups

    def group_of(self, param: ParamRef) -> int:
        """weft_zero_group_of(): the group of parameter `param` (an index or a name)."""
        g = ctypes.c_size_t()
        _errors.check(_lib.fn("weft_zero_group_of")(self._h(), self._index(param), ctypes.byref(g)))
        return g.value

    def param(self, param: ParamRef, like: str = "numpy") -> Any:
        """weft_zero_param(): the full value of parameter `param` (an index or a name) in weft's
        memory, its shape, param_dtype: a read-only numpy array (bfloat16 as uint16 storage) or,
        like="torch", a torch tensor (bfloat16 as torch.bfloat16; do not write it). Valid until
        the next step() (stages 0-2) or, at stage 3, while its group is gathered (otherwise
        weft.InvalidArgument); copy it to keep it."""
        i = self._index(param)
        t = _lib.weft_tensor_t()
        _errors.check(_lib.fn("weft_zero_param")(self._h(), i, ctypes.byref(t)))
        return _memory_view(t.data, self._shapes[i], t.dtype, self, like, readonly=True)

    def params(self, like: str = "numpy") -> List[Any]:
        """[param(i) for every parameter]."""
        return [self.param(i, like) for i in range(len(self._shapes))]

    def memory(self) -> ZeroMemory:
        """weft_zero_memory() as a ZeroMemory namedtuple (bytes)."""
        m = _lib.weft_zero_memory_t(ctypes.sizeof(_lib.weft_zero_memory_t))
        _errors.check(_lib.fn("weft_zero_memory")(self._h(), ctypes.byref(m)))
        return ZeroMemory(m.params, m.grads, m.optimizer, m.buffers, m.buffers_peak)

    # -------------------------------------------------------------- communicating calls

    def gather(self, group: int, async_op: bool = False) -> Optional[Request]:
        """weft_zero_gather(): stage 3 all-gathers group `group`'s parameters. Blocking returns
        None; async_op=True returns a weft.Request (prefetch while computing: param() is usable
        once it completes), or None when there is nothing to do (stages 0-2, already gathered)."""
        f = _lib.fn("weft_zero_gather")
        with self._mesh._lock:
            if not async_op:
                _errors.check(f(self._h(), int(group), None))
                return None
            req = ctypes.c_void_p()
            _errors.check(f(self._h(), int(group), ctypes.byref(req)))
        if not req.value:
            return None
        return Request(self._mesh, req.value, [self], None, "zero_gather")

    def release(self, group: int) -> None:
        """weft_zero_release(): stage 3 frees group `group`'s gathered parameters (views of them
        must not be used afterwards). Stages 0-2: nothing to do."""
        with self._mesh._lock:
            _errors.check(_lib.fn("weft_zero_release")(self._h(), int(group)))

    def grad_ready(self, param: ParamRef, grad: BufferLike) -> None:
        """weft_zero_grad_ready(): the gradient of parameter `param` (an index or a name) for this
        step: a contiguous numpy array or CPU torch tensor of the parameter's shape and
        param_dtype (bfloat16 as uint16 storage or torch.bfloat16), copied during the call. May
        start its group's reduction (stage 0 all-reduce, 1-3 reduce-scatter)."""
        i = self._index(param)
        v = _view(grad, self._param_dtype, "grad")
        with self._mesh._lock:
            _errors.check(_lib.fn("weft_zero_grad_ready")(self._h(), i, ctypes.byref(v.c)))

    def step(self) -> StepInfo:
        """weft_zero_step(): waits for the reductions, unscales, agrees on skipping, clips, runs
        the optimizer on this rank's shard and (stages 0-2) all-gathers the parameters.
        Collective over the mesh's members. Returns a StepInfo."""
        info = _lib.weft_zero_step_info_t(ctypes.sizeof(_lib.weft_zero_step_info_t))
        with self._mesh._lock:
            _errors.check(_lib.fn("weft_zero_step")(self._h(), ctypes.byref(info)))
        return StepInfo(bool(info.skipped), info.grad_norm, info.loss_scale, info.comm_elements, info.comm_bytes)

    def save(self, path: Union[str, bytes, os.PathLike]) -> None:
        """weft_zero_save(): the optimizer state (master weights, optimizer buffers, step count,
        loss scale) as a weft checkpoint in directory `path`. Collective over the mesh's members."""
        with self._mesh._lock:
            _errors.check(_lib.fn("weft_zero_save")(self._h(), _path(path)))

    def load(self, path: Union[str, bytes, os.PathLike]) -> None:
        """weft_zero_load(): reads a state saved by save() (same parameter shapes and optimizer,
        any data-parallel size) and all-gathers the parameters. Collective over the mesh's members."""
        with self._mesh._lock:
            _errors.check(_lib.fn("weft_zero_load")(self._h(), _path(path)))

    # -------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """weft_zero_destroy(): frees weft's parameters, gradients and state (views of them must
        not be used afterwards). Not collective; idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_zero_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Zero closed>"
        return "<weft.Zero stage %d, %d parameters in %d groups, %s, %r>" % (
            self._stage, len(self._shapes), self._ngroups, self._param_dtype.name.lower(), self._optimizer)


def _path(path):
    p = os.fspath(path)
    if isinstance(p, str):
        p = p.encode("utf-8")
    if not p:
        raise InvalidArgument("path is empty; expected a directory path")
    return p
