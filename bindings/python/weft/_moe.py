"""Expert parallelism (weft/moe.h): the router, the dispatch layout, and dispatch / combine of
tokens between the ranks of a communicator.

    r = weft.route(logits, experts=8, topk=2)                    # numpy float32 [T, E]
    with weft.Moe(comm, experts=8, hidden=16) as moe:
        with moe.dispatch(x, r.indices, r.weights) as h:          # collective
            y = expert_math(h)                                     # h.tokens [rows, H], h.counts ...
            out = moe.combine(h, y)                                # collective, [T, H]
            gy, gw = moe.combine_backward(h, grad_out)             # collective

Arrays are host memory: numpy arrays, or CPU torch tensors (read through numpy views of their
memory; bfloat16 tensors as bfloat16). Results are numpy arrays (tokens of a bfloat16 dispatch
as uint16 storage, or a torch.bfloat16 tensor when x was a torch tensor).
"""

from __future__ import annotations

import ctypes
import enum
import weakref
from typing import Any, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _errors, _lib
from ._buffers import DType, as_dtype
from ._comm import BufferLike, Comm, DTypeLike
from ._errors import InvalidArgument
from ._handle import Handle
from ._plugin_ids import extension_id
from ._training import _memory_view

DROPPED = -1  # WEFT_MOE_DROPPED


class RouterScore(enum.IntEnum):
    """weft_router_score_t."""

    SOFTMAX = 0
    TOPK_SOFTMAX = 1
    SIGMOID = 2


class Drop(enum.IntEnum):
    """weft_router_drop_t."""

    NONE = 0
    BY_PROBABILITY = 1
    BY_POSITION = 2


def _enum(cls, value, what):
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            pass
    raise InvalidArgument("%s=%r: expected one of %s" % (what, value, ", ".join(m.name.lower() for m in cls)))


# ------------------------------------------------------------------ arrays


def _is_torch(obj):
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr")


def _host_array(obj, what, dtype=None):
    """(contiguous numpy array over obj's memory or a copy of it, its DType). Torch tensors must
    be on the CPU; bfloat16 becomes uint16 storage. dtype= reinterprets uint16 numpy storage as
    bfloat16."""
    if _is_torch(obj):
        import torch
        if obj.device.type != "cpu":
            raise _errors.Unsupported("%s: a %s tensor; the Python MoE binding moves host memory only"
                                      % (what, obj.device.type))
        t = obj.detach()
        if not t.is_contiguous():
            t = t.contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16), DType.BFLOAT16
        arr = t.numpy()
    elif isinstance(obj, np.ndarray):
        arr = obj
        if not (obj.flags.c_contiguous and obj.dtype.isnative):
            arr = np.ascontiguousarray(obj, obj.dtype.newbyteorder("="))
    elif isinstance(obj, (list, tuple)):
        arr = np.asarray(obj)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)  # Python floats: weft's float arrays here are float32
    else:
        raise InvalidArgument("%s: a %s.%s is neither a numpy array nor a torch tensor"
                              % (what, type(obj).__module__, type(obj).__qualname__))
    if dtype is not None and as_dtype(dtype) == DType.BFLOAT16 and arr.dtype in (np.uint16, np.int16):
        return arr.view(np.uint16), DType.BFLOAT16
    try:
        return arr, as_dtype(arr.dtype)
    except InvalidArgument:
        raise InvalidArgument("%s: %s elements are not a weft dtype" % (what, arr.dtype)) from None


def _typed(obj, what, npdtype, shape):
    """obj as a contiguous numpy array of npdtype and shape (a copy when it is not one already)."""
    arr, _ = _host_array(obj, what)
    arr = np.ascontiguousarray(arr, dtype=npdtype)
    if tuple(arr.shape) != tuple(shape):
        raise InvalidArgument("%s: shape %s, expected %s" % (what, tuple(arr.shape), tuple(shape)))
    return arr


class _CTensor:
    """A weft_tensor_t over a contiguous host numpy array (keeps its shape alive)."""

    def __init__(self, arr, dtype):
        self.arr = arr
        self.shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
        self.c = _lib.weft_tensor_t(arr.ctypes.data if arr.size else None, _lib.DEVICE_CPU, 0, arr.ndim, int(dtype),
                                    ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)), None, 0)

    def ref(self):
        return ctypes.byref(self.c)


def _ptr(arr):
    return arr.ctypes.data if arr is not None and arr.size else None


def _like_input(arr, dtype, like):
    """A result array in the caller's kind: torch when `like` is a torch tensor (bfloat16 as
    torch.bfloat16), else numpy."""
    if not _is_torch(like):
        return arr
    import torch
    if dtype == DType.BFLOAT16:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


# ------------------------------------------------------------------ router


class RouteResult(NamedTuple):
    """weft_router_forward()'s results: indices int32 [T, k] (-1 = dropped), weights float32 [T, k],
    tokens_per_expert and selected_per_expert int64 [E], aux_loss and z_loss floats."""

    indices: np.ndarray
    weights: np.ndarray
    tokens_per_expert: np.ndarray
    selected_per_expert: np.ndarray
    aux_loss: float
    z_loss: float


class RouterConfig:
    """weft_router_config_t: E experts, top-k, the score, group-limited routing, a selection
    bias (float32 [E] or None), capacity dropping and the loss coefficients (see weft/moe.h)."""

    def __init__(self, experts: int, topk: int = 1, score: Union[RouterScore, int, str] = "softmax",
                 normalize: bool = False, groups: int = 0, topk_groups: int = 0, bias: BufferLike = None,
                 drop: Union[Drop, int, str] = "none", capacity_factor: float = 1.0, aux_loss_coeff: float = 0.0,
                 z_loss_coeff: float = 0.0, selector: Any = 0) -> None:
        self.experts, self.topk = int(experts), int(topk)
        self.score = _enum(RouterScore, score, "score")
        self.normalize, self.groups, self.topk_groups = bool(normalize), int(groups), int(topk_groups)
        self.bias = None if bias is None else _typed(bias, "bias", np.float32, (self.experts,))
        self.drop = _enum(Drop, drop, "drop")
        self.capacity_factor = float(capacity_factor)
        self.aux_loss_coeff, self.z_loss_coeff = float(aux_loss_coeff), float(z_loss_coeff)
        # 0 = the built-in top-k; a ROUTER plugin entry (weft.load_plugin(...).entry(name)) or its id
        self.selector = extension_id(selector, "selector")

    def _c(self):
        return _lib.weft_router_config_t(ctypes.sizeof(_lib.weft_router_config_t), self.experts, self.topk,
                                         int(self.score), int(self.normalize), self.groups, self.topk_groups,
                                         _ptr(self.bias), int(self.drop), self.capacity_factor,
                                         self.aux_loss_coeff, self.z_loss_coeff, self.selector)

    def __repr__(self):
        return ("RouterConfig(experts=%d, topk=%d, score=%s, normalize=%s, groups=%d, topk_groups=%d, bias=%s, "
                "drop=%s, capacity_factor=%g, aux_loss_coeff=%g, z_loss_coeff=%g, selector=%d)"
                % (self.experts, self.topk, self.score.name.lower(), self.normalize, self.groups, self.topk_groups,
                   "None" if self.bias is None else "[%d]" % self.bias.size, self.drop.name.lower(),
                   self.capacity_factor, self.aux_loss_coeff, self.z_loss_coeff, self.selector))


def _router_config(experts, topk, config, kwargs):
    if config is not None:
        if not isinstance(config, RouterConfig):
            raise InvalidArgument("config=%r: expected a weft.RouterConfig" % (config,))
        if experts is not None or topk is not None or kwargs:
            raise InvalidArgument("pass either config= or the router options, not both")
        return config
    if experts is None:
        raise InvalidArgument("experts is required (or config=weft.RouterConfig(...))")
    return RouterConfig(experts, 1 if topk is None else topk, **kwargs)


def _logits(logits, cfg, what="logits"):
    arr, dt = _host_array(logits, what)
    if dt not in (DType.FLOAT32, DType.BFLOAT16):
        raise InvalidArgument("%s: %s elements; the router takes float32 or bfloat16" % (what, dt.name.lower()))
    if arr.ndim != 2:
        raise InvalidArgument("%s: shape %s, expected [T, E] with E = %d" % (what, tuple(arr.shape), cfg.experts))
    return arr, dt


def route(logits: BufferLike, experts: Optional[int] = None, topk: Optional[int] = None,
          config: Optional[RouterConfig] = None, **options: Any) -> RouteResult:
    """weft_router_forward() on host logits [T, E] (float32 or bfloat16: numpy, or a CPU torch
    tensor). Options as RouterConfig's (score, normalize, groups, topk_groups, bias, drop,
    capacity_factor, aux_loss_coeff, z_loss_coeff, selector), or config=RouterConfig(...). Returns a
    RouteResult of numpy arrays."""
    cfg = _router_config(experts, topk, config, options)
    arr, dt = _logits(logits, cfg)
    t, k, e = arr.shape[0], cfg.topk, cfg.experts
    out = RouteResult(np.empty((t, max(k, 0)), np.int32), np.empty((t, max(k, 0)), np.float32),
                      np.zeros(max(e, 0), np.int64), np.zeros(max(e, 0), np.int64), 0.0, 0.0)
    res = _lib.weft_router_result_t(ctypes.sizeof(_lib.weft_router_result_t), _ptr(out.indices), _ptr(out.weights),
                                    _ptr(out.tokens_per_expert), _ptr(out.selected_per_expert), 0.0, 0.0)
    ct, c = _CTensor(arr, dt), cfg._c()
    _errors.check(_lib.fn("weft_router_forward")(ct.ref(), ctypes.byref(c), ctypes.byref(res), None))
    return out._replace(aux_loss=float(res.aux_loss), z_loss=float(res.z_loss))


def router_backward(logits: BufferLike, indices: BufferLike, grad_weights: BufferLike, experts: Optional[int] = None,
                    topk: Optional[int] = None, grad_aux: float = 0.0, grad_z: float = 0.0,
                    config: Optional[RouterConfig] = None, **options: Any) -> np.ndarray:
    """weft_router_backward(): the float32 gradient [T, E] of sum(grad_weights * weights) +
    grad_aux * aux_loss + grad_z * z_loss w.r.t. the logits, the selection `indices` (as route
    returned them) held fixed. The router options must be those of the forward."""
    cfg = _router_config(experts, topk, config, options)
    arr, dt = _logits(logits, cfg)
    shape = (arr.shape[0], cfg.topk)
    idx = _typed(indices, "indices", np.int32, shape)
    gw = _typed(grad_weights, "grad_weights", np.float32, shape)
    grad = np.zeros(arr.shape, np.float32)
    ct, cg, c = _CTensor(arr, dt), _CTensor(grad, DType.FLOAT32), cfg._c()
    _errors.check(_lib.fn("weft_router_backward")(ct.ref(), ctypes.byref(c), _ptr(idx), _ptr(gw), float(grad_aux),
                                                  float(grad_z), cg.ref(), None))
    return grad


def update_bias(bias: BufferLike, tokens_per_expert: BufferLike, rate: float) -> Any:
    """weft_router_update_bias(): bias[e] += rate * sign(mean load - load[e]), in place on a
    float32 numpy array (or CPU torch tensor) of E entries; returns it."""
    arr, dt = _host_array(bias, "bias")
    if dt != DType.FLOAT32 or arr.ndim != 1:
        raise InvalidArgument("bias: expected a float32 vector, got %s %s" % (dt.name.lower(), tuple(arr.shape)))
    same_memory = arr.ctypes.data == bias.data_ptr() if _is_torch(bias) else arr is bias
    if not same_memory:
        raise InvalidArgument("bias: updated in place, so it must be a contiguous native float32 array")
    load = _typed(tokens_per_expert, "tokens_per_expert", np.int64, arr.shape)
    _errors.check(_lib.fn("weft_router_update_bias")(_ptr(arr), _ptr(load), arr.size, float(rate)))
    return bias


def _expert_rank(expert_rank, experts):
    if expert_rank is None:
        return None
    return _typed(expert_rank, "expert_rank", np.int32, (experts,))


class Layout(NamedTuple):
    """weft_moe_layout(): int64 [nranks], int64 [E], bool [T, nranks]."""

    tokens_per_rank: np.ndarray
    tokens_per_expert: np.ndarray
    token_in_rank: np.ndarray


def layout(indices: BufferLike, experts: int, nranks: int, expert_rank: Optional[Sequence[int]] = None) -> Layout:
    """weft_moe_layout() (DeepEP's get_dispatch_layout) from indices int32 [T, k] (-1 dropped)."""
    idx, _ = _host_array(indices, "indices")
    if idx.ndim != 2:
        raise InvalidArgument("indices: shape %s, expected [T, k]" % (tuple(idx.shape),))
    idx = np.ascontiguousarray(idx, np.int32)
    t, k = idx.shape
    er = _expert_rank(expert_rank, int(experts))
    out = Layout(np.zeros(max(int(nranks), 0), np.int64), np.zeros(max(int(experts), 0), np.int64),
                 np.zeros((t, max(int(nranks), 0)), np.uint8))
    _errors.check(_lib.fn("weft_moe_layout")(_ptr(idx), t, k, int(experts), int(nranks), _ptr(er),
                                             _ptr(out.tokens_per_rank), _ptr(out.tokens_per_expert),
                                             _ptr(out.token_in_rank)))
    return out._replace(token_in_rank=out.token_in_rank.astype(bool))


# ------------------------------------------------------------------ dispatch and combine

_live = weakref.WeakSet()  # Moe objects, closed at exit before the communicators


def _close_all():
    for m in list(_live):
        try:
            m.close()
        except Exception:
            pass


def _np_array(ptr, n, ctype, npdtype):
    if n == 0 or not ptr:
        return np.zeros(n, npdtype)
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctype)), shape=(n,)).astype(npdtype, copy=True)


class MoeHandle(Handle):
    """What one dispatch delivered (weft_moe_handle_t). `tokens` [rows, H] is a view of weft's
    memory (numpy, or a torch tensor when the dispatched x was one), valid until close(): copy
    what must outlive the handle. The per-row arrays are numpy copies: row_expert (-1 on
    padding), row_weight, row_source_rank, row_source_token; experts (the local experts, in
    index order), counts and offsets (expert j's rows are offsets[j] .. offsets[j] + counts[j]).
    A context manager; close() (not collective) frees it."""

    def __init__(self, moe: Moe, handle: int, tokens: int, topk: int, like: bool) -> None:
        self._handle = handle
        self._moe = moe
        self.num_tokens, self.topk = tokens, topk
        rec = _lib.weft_moe_received_t(ctypes.sizeof(_lib.weft_moe_received_t))
        _errors.check(_lib.fn("weft_moe_handle_received")(handle, ctypes.byref(rec)))
        self.rows = int(rec.rows)
        nl = int(rec.local_experts)
        self.experts = _np_array(rec.experts, nl, ctypes.c_int32, np.int32)
        self.counts = _np_array(rec.counts, nl, ctypes.c_int64, np.int64)
        self.offsets = _np_array(rec.offsets, nl + 1, ctypes.c_int64, np.int64)
        self.row_expert = _np_array(rec.row_expert, self.rows, ctypes.c_int32, np.int32)
        self.row_weight = _np_array(rec.row_weight, self.rows, ctypes.c_float, np.float32)
        self.row_source_rank = _np_array(rec.row_source_rank, self.rows, ctypes.c_int32, np.int32)
        self.row_source_token = _np_array(rec.row_source_token, self.rows, ctypes.c_int64, np.int64)
        t = rec.tokens
        self._tokens_view = (t.data, (self.rows, moe.hidden), DType(t.dtype))
        self._like = "torch" if like else "numpy"

    @property
    def tokens(self) -> Any:
        """The received rows [rows, H], a view of weft memory (valid until close())."""
        if self._handle is None:
            raise InvalidArgument("the MoE handle is closed: its received tokens are gone")
        ptr, shape, dt = self._tokens_view
        return _memory_view(ptr, shape, dt, self, like=self._like)

    @property
    def local_experts(self) -> int:
        """Number of experts this rank holds."""
        return int(self.experts.size)

    def expert_rows(self, j: int) -> Tuple[int, int]:
        """(start, stop) of local expert j's received rows (padding excluded)."""
        start = int(self.offsets[j])
        return start, start + int(self.counts[j])

    def _h(self):
        if self._handle is None:
            raise InvalidArgument("the MoE handle is closed")
        return self._handle

    def close(self) -> None:
        """weft_moe_handle_destroy(). Not collective; idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_moe_handle_destroy")(h))

    def __repr__(self):
        return "<weft.MoeHandle %s: %d rows for experts %s>" % ("closed" if self.closed else "open", self.rows,
                                                                 list(self.experts))


class Moe(Handle):
    """Dispatch and combine over `comm` (weft_moe_t) for `experts` experts of hidden size
    `hidden` and token dtype `dtype` (float32, bfloat16 or float16). expert_rank: None
    (contiguous blocks by torch.chunk's rule) or E ranks. expert_alignment pads each local
    expert's rows with zeros to a multiple of it. fp8_dispatch: tokens travel as FP8 E4M3.
    Creation is collective: every rank passes the same options."""

    def __init__(self, comm: Comm, experts: int, hidden: int, dtype: DTypeLike = "float32",
                 expert_rank: Optional[Sequence[int]] = None, expert_alignment: int = 0,
                 fp8_dispatch: bool = False) -> None:
        self._handle = None
        if not isinstance(comm, Comm):
            raise InvalidArgument("Moe(comm=...): expected a weft.Comm, got %r" % (comm,))
        self._comm = comm
        self.experts, self.hidden = int(experts), int(hidden)
        self.dtype = as_dtype(dtype)
        self.expert_alignment, self.fp8_dispatch = int(expert_alignment), bool(fp8_dispatch)
        self._expert_rank = _expert_rank(expert_rank, self.experts)
        cfg = _lib.weft_moe_config_t(ctypes.sizeof(_lib.weft_moe_config_t), self.experts, self.hidden,
                                     int(self.dtype), _ptr(self._expert_rank), self.expert_alignment,
                                     int(self.fp8_dispatch), 0)
        out = ctypes.c_void_p()
        with comm._lock:
            _errors.check(_lib.fn("weft_moe_create")(comm._h(), ctypes.byref(cfg), ctypes.byref(out)))
        self._handle = out.value
        self._handles = weakref.WeakSet()  # closed before the Moe: a handle must not outlive it
        _live.add(self)

    @property
    def comm(self) -> Comm:
        """The communicator the experts are spread over."""
        return self._comm

    def expert_rank(self, e: int) -> int:
        """The rank that holds expert e."""
        if self._expert_rank is not None:
            return int(self._expert_rank[e])
        n = self._comm.size
        c = -(-self.experts // n)
        return e // c

    def _h(self):
        if self._handle is None:
            raise InvalidArgument("the Moe is closed")
        return self._handle

    def _c_tensor(self, obj, what, problems):
        """A _CTensor over obj as it is (shape and dtype are weft's to check, on every rank
        together), or None when obj is not an array at all (the problem is noted)."""
        try:
            arr, dt = _host_array(obj, what, self.dtype)
            return _CTensor(arr, dt)
        except InvalidArgument as e:
            problems.append(e)
            return None

    def _call(self, name, args, problems):
        """Calls weft_moe_<name> under the communicator's lock. A problem only the binding can
        see (problems) still makes the call, with its tensor NULL: weft then refuses on this rank
        and tells the other ranks, which fail naming it instead of waiting; here the binding's
        own message is raised."""
        with self._comm._lock:
            status = _lib.fn(name)(*args)
        if problems:
            try:
                _errors.check(status)
            except _errors.WeftError as err:
                raise problems[0] from err
            raise problems[0]
        _errors.check(status)

    def dispatch(self, x: BufferLike, indices: BufferLike, weights: BufferLike) -> MoeHandle:
        """weft_moe_dispatch(), collective: x [T, H], indices int32 [T, k] (-1 = dropped),
        weights float32 [T, k]. Returns the MoeHandle of what this rank received. Bad input on
        one rank fails the call on every rank (naming that rank), never a hang."""
        problems = []
        cx = self._c_tensor(x, "x", problems)
        t = int(cx.arr.shape[0]) if cx is not None and cx.arr.ndim else 0
        idx = w = None
        try:
            idx, _ = _host_array(indices, "indices")
            if idx.ndim != 2 or idx.shape[0] != t:
                raise InvalidArgument("indices: shape %s, expected [T, k] with T = %d (x's rows)"
                                      % (tuple(idx.shape), t))
            idx = np.ascontiguousarray(idx, np.int32)
            w = _typed(weights, "weights", np.float32, idx.shape)
        except InvalidArgument as e:
            problems.append(e)
        k = int(idx.shape[1]) if idx is not None and idx.ndim == 2 else 1
        out = ctypes.c_void_p()
        args = (self._h(), None if problems else cx.ref(), _ptr(idx) if not problems else None,
                _ptr(w) if not problems else None, t, k, None, ctypes.byref(out))
        try:
            self._call("weft_moe_dispatch", args, problems)
        except BaseException:
            if out.value:  # a problem weft did not see (no tokens): the handle is not wanted
                _lib.fn("weft_moe_handle_destroy")(out.value)
            raise
        try:
            handle = MoeHandle(self, out.value, t, k, _is_torch(x))
            self._handles.add(handle)
            return handle
        except BaseException:
            _lib.fn("weft_moe_handle_destroy")(out.value)
            raise

    def _handle_of(self, handle):
        if not isinstance(handle, MoeHandle) or handle._moe is not self:
            raise InvalidArgument("handle=%r: expected a MoeHandle from this Moe's dispatch" % (handle,))
        return handle._h()

    def _result(self, given, rows, what, like, problems):
        """(_CTensor weft writes, the object returned) for a result of [rows, H]: a new array in
        the kind of `like`, or `given` itself (which must be written in place)."""
        if given is None:
            npd = np.uint16 if self.dtype == DType.BFLOAT16 else np.dtype(self.dtype.name.lower())
            arr = np.zeros((rows, self.hidden), npd)
            return _CTensor(arr, self.dtype), _like_input(arr, self.dtype, like)
        ct = self._c_tensor(given, what, problems)
        if ct is not None:
            shares = ct.arr.ctypes.data == (given.data_ptr() if _is_torch(given) else given.ctypes.data)
            if not shares or (isinstance(given, np.ndarray) and not given.flags.writeable):
                problems.append(InvalidArgument("%s: must be a writable contiguous array (it is written in place)"
                                                % what))
        return ct, given

    def combine(self, handle: MoeHandle, expert_out: BufferLike, weighted: bool = True, out: BufferLike = None) -> Any:
        """weft_moe_combine(), collective: expert_out [rows, H] in the received layout back to
        the tokens' ranks; returns out [T, H] (a new array in expert_out's kind, or `out`): per
        token the float32 sum in slot order of weight * row (weights of 1 when weighted=False,
        which is the backward of dispatch)."""
        problems = []
        h = self._handle_of(handle)
        ce = self._c_tensor(expert_out, "expert_out", problems)
        co, target = self._result(out, handle.num_tokens, "out", expert_out, problems)
        args = (self._h(), h, None if problems else ce.ref(), 1 if weighted else 0, None if problems else co.ref(),
                None)
        self._call("weft_moe_combine", args, problems)
        return target

    def combine_backward(self, handle: MoeHandle, grad_out: BufferLike,
                         grad_expert_out: BufferLike = None) -> Tuple[Any, Any]:
        """weft_moe_combine_backward(), collective: from grad_out [T, H], (grad_expert_out
        [rows, H] in the received layout, grad_weights float32 [T, k]) of the last combine on
        this handle."""
        problems = []
        h = self._handle_of(handle)
        cg = self._c_tensor(grad_out, "grad_out", problems)
        cr, target = self._result(grad_expert_out, handle.rows, "grad_expert_out", grad_out, problems)
        gw = np.zeros((handle.num_tokens, handle.topk), np.float32)
        args = (self._h(), h, None if problems else cg.ref(), None if problems else cr.ref(), _ptr(gw), None)
        self._call("weft_moe_combine_backward", args, problems)
        return target, _like_input(gw, DType.FLOAT32, grad_out)

    def close(self) -> None:
        """weft_moe_destroy(), after closing its open handles. Not collective; idempotent."""
        for handle in list(getattr(self, "_handles", ())):
            handle.close()
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_moe_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Moe closed>"
        return "<weft.Moe %d experts, hidden %d, %s on rank %d of %d>" % (
            self.experts, self.hidden, self.dtype.name.lower(), self._comm.rank, self._comm.size)


__all__ = ["DROPPED", "Drop", "Layout", "Moe", "MoeHandle", "RouteResult", "RouterConfig", "RouterScore", "layout",
           "route", "router_backward", "update_bias"]
