"""The planner (weft/plan.h): weft.plan_layouts and weft.LayoutPlan.

From a model (a list of weft.PlanLayer), a cluster (weft.PlanCluster) and a global batch, the
planner ranks the parallel layouts (weft.PlanLayout: dp, tp, pp, ep, cp, ZeRO stage, pipeline
schedule and micro-batches) by predicted step time under the memory cap, and reports what
parallelism buys (weft.PlanScaling and weft.ScalingPoint: Amdahl and Gustafson). Nothing
communicates: a plan is arithmetic on the descriptions plus the pipeline simulator. plan.h
states the cost model and the text file formats LayoutPlan.load reads.

    layers = [weft.PlanLayer("block", count=4, params=1e6, forward_seconds=1e-4,
                             activation_bytes=4096, output_bytes=1024)]
    cluster = weft.PlanCluster(ranks_per_host=8, memory_per_rank=16e9, intra_bandwidth=1e10)
    with weft.plan_layouts(layers, cluster, global_batch=64) as p:
        print(p.table()); print(p.report()); best = p.best

The names are LayoutPlan / plan_layouts because weft.Plan / weft.plan are the redistribution
plan of sharded tensors.
"""

from __future__ import annotations

import ctypes
import dataclasses
import enum
import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _errors, _lib, _plan_c
from ._errors import InvalidArgument
from ._handle import Handle
from ._pipeline import ScheduleKind, ScheduleKindLike, _kind_of, as_schedule_kind

PathLike = Union[str, bytes, os.PathLike]


@dataclasses.dataclass
class PlanLayer:
    """weft_plan_layer_t: one layer kind of the model, `count` identical copies in a row. Per-sample
    quantities are for one sample of the global batch; experts > 0 makes it an MoE layer (params
    counts every expert, flops and times are per sample through its top_k experts);
    tensor_parallel=False keeps it whole on every tp rank. forward_seconds > 0 overrides
    forward_flops; backward_seconds 0 means twice the forward. tp_replicated: of a layer split over
    tp (tensor_parallel, or an MoE layer), the share (0..1) of its forward and backward time that
    every tp rank runs whole (norms, residual adds, a projection outside the split); 0 = none.
    tp_allreduces: all-reduces over tp per micro-batch in each direction of a splittable dense
    layer (0 = 2: a transformer block; 1: an MLP or attention block alone). shared_params: of an
    MoE layer's params, those every rank holds whole (the router, shared experts); its tokens are
    split over tp, so their gradients are all-reduced over tp once a step, then reduced over dp as
    a dense layer's; the rest are the experts, sharded over ep."""

    name: str = ""
    count: int = 1
    experts: int = 0
    top_k: int = 1
    tensor_parallel: bool = True
    params: float = 0.0
    forward_flops: float = 0.0
    forward_seconds: float = 0.0
    backward_seconds: float = 0.0
    activation_bytes: float = 0.0
    output_bytes: float = 0.0
    context_bytes: float = 0.0
    tp_replicated: float = 0.0
    tp_allreduces: int = 0
    shared_params: float = 0.0


class PlanCollectiveKind(enum.IntEnum):
    """weft_plan_collective_kind_t: the collectives a cluster may give measured costs for."""

    ALLREDUCE = 0
    ALLTOALL = 1


# Names besides the enum's ("allreduce", "all_reduce", "all-reduce", "ALLTOALL", ...).
_COLLECTIVE_NAMES = {"allreduce": PlanCollectiveKind.ALLREDUCE, "alltoall": PlanCollectiveKind.ALLTOALL}


def as_collective_kind(kind: Union[PlanCollectiveKind, int, str], what: str = "collective kind") -> PlanCollectiveKind:
    """PlanCollectiveKind from itself, its int value or a name ("allreduce", "all_to_all", ...)."""
    if isinstance(kind, PlanCollectiveKind):
        return kind
    if isinstance(kind, int) and not isinstance(kind, bool) and kind in PlanCollectiveKind._value2member_map_:
        return PlanCollectiveKind(kind)
    if isinstance(kind, str):
        key = kind.strip().lower().replace("_", "").replace("-", "")
        if key in _COLLECTIVE_NAMES:
            return _COLLECTIVE_NAMES[key]
    raise InvalidArgument("%s = %r: expected a weft.PlanCollectiveKind or one of %s"
                          % (what, kind, ", ".join(sorted(_COLLECTIVE_NAMES))))


@dataclasses.dataclass(frozen=True)
class PlanCollective:
    """weft_plan_collective_t: one small collective of `kind` ("allreduce" or "alltoall", or a
    PlanCollectiveKind) over `ranks` ranks of one host (2 <= ranks <= ranks_per_host) measured at
    `seconds` while every rank of the host computed between calls (weft-bench --cluster-file
    measures them). Within a host it replaces that kind's latency term (plan.h's cost model)."""

    kind: Union[PlanCollectiveKind, int, str]
    ranks: int
    seconds: float


# A PlanCollective or a (kind, ranks, seconds) tuple.
PlanCollectiveLike = Union[PlanCollective, Tuple[Union[PlanCollectiveKind, int, str], int, float]]


@dataclasses.dataclass
class PlanCluster:
    """weft_plan_cluster_t: hosts x ranks_per_host ranks, each with memory_per_rank bytes and
    flops_per_rank operations per second; links within a host (intra_*) and between hosts
    (inter_*, needed when hosts > 1), bandwidths in bytes/s per rank, latencies in seconds.
    intra_collectives: measured small collectives within one host (PlanCollective or (kind, ranks,
    seconds) tuples, e.g. [("allreduce", 2, 3e-6), ("alltoall", 4, 7e-6)]); none (the default)
    prices every collective's latency term from intra_latency."""

    hosts: int = 1
    ranks_per_host: int = 1
    memory_per_rank: float = 0.0
    flops_per_rank: float = 0.0
    intra_bandwidth: float = 0.0
    intra_latency: float = 0.0
    inter_bandwidth: float = 0.0
    inter_latency: float = 0.0
    intra_collectives: Sequence[PlanCollectiveLike] = ()


@dataclasses.dataclass
class PlanLayout:
    """weft_plan_layout_t: a layout and its prediction. As the `layout` option only the first nine
    fields count (schedule CUSTOM = try every generator, microbatches 0 = every count,
    stages_per_rank 0 = every allowed one); a plan's layouts have every field set: the predicted
    step (pipeline makespan + exposed data-parallel time), its compute and communication parts,
    the pipeline bubble, bytes per rank (static: weights, gradients, optimizer state; plus the
    activation peak), bytes one rank sends per step, and whether it fits the memory cap."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    cp: int = 1
    zero_stage: int = 0
    schedule: Union[ScheduleKind, int] = ScheduleKind.CUSTOM
    microbatches: int = 0
    stages_per_rank: int = 0
    fits: bool = False
    step_seconds: float = 0.0
    compute_seconds: float = 0.0
    communication_seconds: float = 0.0
    bubble_fraction: float = 0.0
    memory_per_rank: float = 0.0
    static_bytes: float = 0.0
    activation_bytes: float = 0.0
    communication_bytes: float = 0.0


@dataclasses.dataclass(frozen=True)
class PlanInfo:
    """weft_plan_info_t: the ranks planned for, the batch, the layouts kept, predicted and feasible."""

    ranks: int
    global_batch: int
    count: int
    searched: int
    feasible: int


@dataclasses.dataclass(frozen=True)
class PlanScaling:
    """weft_plan_scaling_t: at N = ranks, the one-rank and the best step, speedup, efficiency
    (speedup / N), Amdahl's serial fraction solved from the speedup, and Gustafson's scaled
    speedup N - s (N - 1)."""

    ranks: int
    one_rank_seconds: float
    step_seconds: float
    speedup: float
    efficiency: float
    serial_fraction: float
    gustafson_speedup: float


@dataclasses.dataclass(frozen=True)
class ScalingPoint:
    """weft_plan_scaling_point_t: at n ranks, the strong-scaling step and speedup beside Amdahl's,
    and the weak-scaling batch, step and speedup beside Gustafson's."""

    ranks: int
    weak_batch: int
    fits: bool
    strong_seconds: float
    strong_speedup: float
    amdahl_speedup: float
    weak_seconds: float
    weak_speedup: float
    gustafson_speedup: float


def _int(value, what, minimum=0):
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            if isinstance(value, bool) or int(value) != value:
                raise ValueError
            value = int(value)
        except (TypeError, ValueError):
            raise InvalidArgument("%s: %r is not an integer" % (what, value)) from None
    if value < minimum or value > 0x7FFFFFFF:
        raise InvalidArgument("%s = %d: expected an integer in [%d, 2^31)" % (what, value, minimum))
    return value


def _c_layer(layer, i):
    if not isinstance(layer, PlanLayer):
        raise InvalidArgument("layers[%d]: %r is not a weft.PlanLayer" % (i, layer))
    what = "layers[%d] (%s)" % (i, layer.name or "unnamed")
    name = layer.name.encode("utf-8") if layer.name else None
    if name is not None and b"\0" in name:
        raise InvalidArgument("%s: the name contains a NUL character" % what)
    return _plan_c.weft_plan_layer_t(name, _int(layer.count, what + ".count"), _int(layer.experts, what + ".experts"),
                                     _int(layer.top_k, what + ".top_k"), 1 if layer.tensor_parallel else 0,
                                     float(layer.params), float(layer.forward_flops), float(layer.forward_seconds),
                                     float(layer.backward_seconds), float(layer.activation_bytes),
                                     float(layer.output_bytes), float(layer.context_bytes),
                                     float(layer.tp_replicated), _int(layer.tp_allreduces, what + ".tp_allreduces"),
                                     float(layer.shared_params))


def _c_collective(m, i):
    what = "cluster.intra_collectives[%d]" % i
    if isinstance(m, PlanCollective):
        kind, ranks, seconds = m.kind, m.ranks, m.seconds
    else:
        try:
            kind, ranks, seconds = m
        except (TypeError, ValueError):
            raise InvalidArgument("%s: %r is not a weft.PlanCollective or (kind, ranks, seconds)" % (what, m)) from None
    try:
        secs = float(seconds)
    except (TypeError, ValueError):
        raise InvalidArgument("%s.seconds: %r is not a number" % (what, seconds)) from None
    return _plan_c.weft_plan_collective_t(int(as_collective_kind(kind, what + ".kind")),
                                          _int(ranks, what + ".ranks"), secs)


def _c_cluster(c):
    """(the weft_plan_cluster_t, the intra_collectives array it points at or None): keep both alive."""
    if not isinstance(c, PlanCluster):
        raise InvalidArgument("cluster: %r is not a weft.PlanCluster" % (c,))
    ms = [] if c.intra_collectives is None else c.intra_collectives
    if isinstance(ms, (str, bytes, PlanCollective)):
        raise InvalidArgument("cluster.intra_collectives: %r is not a sequence of collectives" % (ms,))
    try:
        ms = list(ms)
    except TypeError:
        raise InvalidArgument("cluster.intra_collectives: %r is not a sequence of collectives" % (ms,)) from None
    arr = (_plan_c.weft_plan_collective_t * len(ms))(*[_c_collective(m, i) for i, m in enumerate(ms)]) if ms else None
    k = _plan_c.weft_plan_cluster_t(ctypes.sizeof(_plan_c.weft_plan_cluster_t), _int(c.hosts, "cluster.hosts"),
                                    _int(c.ranks_per_host, "cluster.ranks_per_host"), float(c.memory_per_rank),
                                    float(c.flops_per_rank), float(c.intra_bandwidth), float(c.intra_latency),
                                    float(c.inter_bandwidth), float(c.inter_latency))
    if arr is not None:
        k.intra_collectives = ctypes.cast(arr, ctypes.POINTER(_plan_c.weft_plan_collective_t))
        k.num_intra_collectives = len(ms)
    return k, arr


def _c_layout(lay):
    if not isinstance(lay, PlanLayout):
        raise InvalidArgument("layout: %r is not a weft.PlanLayout" % (lay,))
    c = _plan_c.weft_plan_layout_t()
    c.struct_size = ctypes.sizeof(c)
    for f in ("dp", "tp", "pp", "ep", "cp", "zero_stage", "microbatches", "stages_per_rank"):
        setattr(c, f, _int(getattr(lay, f), "layout." + f))
    c.schedule = int(as_schedule_kind(lay.schedule))
    return c


def _py_layout(c):
    return PlanLayout(c.dp, c.tp, c.pp, c.ep, c.cp, c.zero_stage, _kind_of(c.schedule), c.microbatches,
                      c.stages_per_rank, bool(c.fits), c.step_seconds, c.compute_seconds, c.communication_seconds,
                      c.bubble_fraction, c.memory_per_rank, c.static_bytes, c.activation_bytes, c.communication_bytes)


class _Config:
    """A weft_plan_config_t and every C object it points at, alive together."""

    def __init__(self, layers, cluster, global_batch, ranks=0, weight_bytes=0.0, grad_bytes=0.0,
                 optimizer_bytes=0.0, microbatch_overhead=0.0, top=0, include_infeasible=False, max_pp=0, max_tp=0,
                 max_cp=0, tp_across_hosts=False, kinds=None, max_microbatches=0, layout=None, scaling=False,
                 grad_allreduce_bytes=0.0):
        layers = list(layers) if layers is not None else []
        self.layers = (_plan_c.weft_plan_layer_t * max(1, len(layers)))(*[_c_layer(l, i) for i, l in enumerate(layers)])
        self.cluster, self.collectives = _c_cluster(cluster) if cluster is not None else (None, None)
        self.kinds = None
        if kinds is not None:
            ks = [int(as_schedule_kind(k)) for k in kinds]
            self.kinds = (ctypes.c_int * max(1, len(ks)))(*ks)
        self.layout = _c_layout(layout) if layout is not None else None
        c = _plan_c.weft_plan_config_t()
        c.struct_size = ctypes.sizeof(c)
        if layers:
            c.layers = ctypes.cast(self.layers, ctypes.POINTER(_plan_c.weft_plan_layer_t))
        c.num_layers = len(layers)
        c.layer_size = ctypes.sizeof(_plan_c.weft_plan_layer_t)   # the stride of self.layers: 104 bytes
        if self.cluster is not None:
            c.cluster = ctypes.pointer(self.cluster)
        c.global_batch = _int(global_batch, "global_batch")
        c.ranks = _int(ranks, "ranks")
        c.weight_bytes, c.grad_bytes = float(weight_bytes), float(grad_bytes)
        c.optimizer_bytes, c.microbatch_overhead = float(optimizer_bytes), float(microbatch_overhead)
        c.top = _int(top, "top")
        c.include_infeasible = 1 if include_infeasible else 0
        c.max_pp, c.max_tp, c.max_cp = _int(max_pp, "max_pp"), _int(max_tp, "max_tp"), _int(max_cp, "max_cp")
        c.tp_across_hosts = 1 if tp_across_hosts else 0
        if self.kinds is not None:
            c.kinds = ctypes.cast(self.kinds, ctypes.POINTER(ctypes.c_int))
            c.nkinds = len(ks)
        c.max_microbatches = _int(max_microbatches, "max_microbatches")
        if self.layout is not None:
            c.layout = ctypes.pointer(self.layout)
        c.scaling = 1 if scaling else 0
        c.grad_allreduce_bytes = float(grad_allreduce_bytes)
        self.c = c


def _path(path, what):
    p = os.fspath(path)
    if isinstance(p, str):
        p = p.encode("utf-8")
    if not p:
        raise InvalidArgument("%s is empty; expected a file path" % what)
    return p


class LayoutPlan(Handle):
    """A plan (weft_plan_t): the kept layouts, best first, immutable. Make one with
    weft.plan_layouts(...) (or LayoutPlan.create) from Python descriptions, or LayoutPlan.load from
    plan.h's text files. Options (keywords; 0 / None / False = plan.h's default): ranks,
    weight_bytes, grad_bytes, optimizer_bytes, microbatch_overhead, top, include_infeasible,
    max_pp, max_tp, max_cp, tp_across_hosts, kinds (schedules to try), max_microbatches, layout (a
    PlanLayout: predict only it), scaling (compute the curves at once), grad_allreduce_bytes (bytes
    per parameter of an all-reduce of the gradients over their replicas before the ZeRO reduction:
    a float64 sum for reproducibility is 8; 0 = none, or the model file's)."""

    def __init__(self, _handle: int) -> None:
        self._handle = _handle
        info = _plan_c.weft_plan_info_t()
        info.struct_size = ctypes.sizeof(info)
        try:
            _errors.check(_lib.fn("weft_plan_info")(_handle, ctypes.byref(info)))
        except BaseException:
            _lib.fn("weft_plan_destroy")(_handle)
            self._handle = None
            raise
        self._info = PlanInfo(info.ranks, info.global_batch, info.count, info.searched, info.feasible)

    @classmethod
    def create(cls, layers: Sequence[PlanLayer], cluster: PlanCluster, global_batch: int,
               **options: Any) -> LayoutPlan:
        """weft_plan_create(): ranks the layouts of `layers` on `cluster` at `global_batch`
        samples per step (or predicts options["layout"] alone)."""
        if cluster is None:
            raise InvalidArgument("cluster is required: a weft.PlanCluster")
        cfg = _Config(layers, cluster, global_batch, **options)
        out = ctypes.c_void_p()
        _errors.check(_lib.fn("weft_plan_create")(ctypes.byref(cfg.c), ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def load(cls, model_path: PathLike, cluster_path: PathLike, global_batch: int = 0,
             **options: Any) -> LayoutPlan:
        """weft_plan_load(): the model and the cluster from plan.h's text files (errors name
        file:line and the key); global_batch 0 = the model file's train line, and the nonzero
        options override the files' values."""
        cfg = _Config(None, None, global_batch, **options)
        out = ctypes.c_void_p()
        _errors.check(_lib.fn("weft_plan_load")(_path(model_path, "model_path"), _path(cluster_path, "cluster_path"),
                                                ctypes.byref(cfg.c), ctypes.byref(out)))
        return cls(out.value)

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the plan is closed")
        return h

    @property
    def info(self) -> PlanInfo:
        """PlanInfo(ranks, global_batch, count, searched, feasible)."""
        return self._info

    def layout(self, index: int) -> PlanLayout:
        """weft_plan_layout(): the index-th kept layout, best first (negative counts from the end)."""
        n = self._info.count
        i = _int(index + n if isinstance(index, int) and -n <= index < 0 else index, "index")
        c = _plan_c.weft_plan_layout_t()
        c.struct_size = ctypes.sizeof(c)
        _errors.check(_lib.fn("weft_plan_layout")(self._h(), i, ctypes.byref(c)))
        return _py_layout(c)

    @property
    def layouts(self) -> List[PlanLayout]:
        """Every kept layout, best first."""
        return [self.layout(i) for i in range(self._info.count)]

    @property
    def best(self) -> Optional[PlanLayout]:
        """The first kept layout (the fastest that fits, or the one predicted), None when none was kept."""
        return self.layout(0) if self._info.count else None

    def __len__(self) -> int:
        return self._info.count

    def __iter__(self):
        return iter(self.layouts)

    def scaling(self) -> Tuple[PlanScaling, List[ScalingPoint]]:
        """weft_plan_scaling(): (the Amdahl/Gustafson summary at the plan's ranks, the strong and
        weak scaling curve at 1, 2, 4, ... ranks). Searches once per point on the first call."""
        f = _lib.fn("weft_plan_scaling")
        s = _plan_c.weft_plan_scaling_t()
        s.struct_size = ctypes.sizeof(s)
        n = ctypes.c_size_t()
        _errors.check(f(self._h(), ctypes.byref(s), None, 0, ctypes.byref(n)))
        pts = (_plan_c.weft_plan_scaling_point_t * max(1, n.value))()
        _errors.check(f(self._h(), ctypes.byref(s), pts, n.value, ctypes.byref(n)))
        summary = PlanScaling(s.ranks, s.one_rank_seconds, s.step_seconds, s.speedup, s.efficiency,
                              s.serial_fraction, s.gustafson_speedup)
        points = [ScalingPoint(p.ranks, p.weak_batch, bool(p.fits), p.strong_seconds, p.strong_speedup,
                               p.amdahl_speedup, p.weak_seconds, p.weak_speedup, p.gustafson_speedup)
                  for p in pts[:n.value]]
        return summary, points

    def format(self, what: Union[str, int] = "table") -> str:
        """weft_plan_format(): "table" (the kept layouts), "report" (Amdahl/Gustafson with the
        curves) or "json"."""
        kinds = {"table": _plan_c.FORMAT_TABLE, "report": _plan_c.FORMAT_REPORT, "json": _plan_c.FORMAT_JSON}
        if isinstance(what, str):
            if what.lower() not in kinds:
                raise InvalidArgument("format %r: expected one of %s" % (what, ", ".join(kinds)))
            what = kinds[what.lower()]
        f = _lib.fn("weft_plan_format")
        n = ctypes.c_size_t()
        _errors.check(f(self._h(), int(what), None, 0, ctypes.byref(n)))
        buf = ctypes.create_string_buffer(n.value + 1)
        _errors.check(f(self._h(), int(what), buf, n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8")

    def table(self) -> str:
        """The kept layouts as a text table, best first."""
        return self.format("table")

    def report(self) -> str:
        """The Amdahl/Gustafson report with the strong and weak scaling curves."""
        return self.format("report")

    def json(self) -> Dict[str, Any]:
        """The plan as a dict (plan.h's JSON: ranks, global_batch, searched, feasible, layouts, scaling)."""
        return json.loads(self.format("json"))

    def close(self) -> None:
        """weft_plan_destroy(). Idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_plan_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.LayoutPlan closed>"
        i = self._info
        return "<weft.LayoutPlan %d ranks, batch %d: %d layouts kept of %d searched (%d fit)>" % (
            i.ranks, i.global_batch, i.count, i.searched, i.feasible)


def plan_layouts(layers: Iterable[PlanLayer], cluster: PlanCluster, global_batch: int,
                 kinds: Optional[Iterable[ScheduleKindLike]] = None, layout: Optional[PlanLayout] = None,
                 **options: Any) -> LayoutPlan:
    """weft_plan_create(): the layouts of the model `layers` on `cluster` at `global_batch` samples
    per step, ranked by predicted step time (those that fit first); with `layout`, that one layout
    predicted. The other options are LayoutPlan's. Use it in a `with` block or close() it."""
    return LayoutPlan.create(list(layers), cluster, global_batch, kinds=kinds, layout=layout, **options)


__all__ = ["LayoutPlan", "PlanCluster", "PlanCollective", "PlanCollectiveKind", "PlanInfo", "PlanLayer", "PlanLayout", "PlanScaling", "ScalingPoint",
           "plan_layouts"]
