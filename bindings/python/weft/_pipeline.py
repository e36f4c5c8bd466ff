"""Pipeline schedules (weft/pipeline.h): weft.Schedule, weft.Timeline, weft.tune and the
executor weft.Pipeline.

A schedule is plain data: per pipeline rank an ordered list of weft.Action (kind, stage,
microbatch), written as torch.distributed.pipelining writes them ("0F0", "1SEND_F3", "2I1",
"0REDUCE_GRAD"). Schedules come from a generator (Schedule.generate), from action lists
(Schedule.from_actions), from torch's CSV (Schedule.from_csv) or from a file (Schedule.load);
they can be validated, simulated (a Timeline), saved and run by a Pipeline over a communicator,
which calls Python stage callbacks with numpy views of weft's boundary buffers.
"""

from __future__ import annotations

import ctypes
import enum
import os
import re
import weakref
from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _errors, _lib
from ._buffers import DType, as_dtype
from ._comm import Comm
from ._errors import InvalidArgument, Status, WeftError
from ._handle import Handle
from ._plugin_ids import extension_id, names_extension
from ._training import _TYPESTR, _memory_view


class ActionKind(enum.IntEnum):
    """weft_action_kind_t."""

    F = 0
    B = 1
    I = 2  # noqa: E741 (torch's name)
    W = 3
    SEND_F = 4
    RECV_F = 5
    SEND_B = 6
    RECV_B = 7
    REDUCE_GRAD = 8


class ScheduleKind(enum.IntEnum):
    """weft_schedule_kind_t: the generators (CUSTOM: a schedule made from lists, CSV or a file)."""

    CUSTOM = -1
    GPIPE = 0
    ONE_F_ONE_B = 1
    INTERLEAVED_1F1B = 2
    ZB_H1 = 3
    ZB_H2 = 4
    ZB_V = 5
    DUALPIPE_V = 6


# Short names, as the weft-schedule tool takes them, besides the enum names.
_KIND_NAMES = {"gpipe": ScheduleKind.GPIPE, "1f1b": ScheduleKind.ONE_F_ONE_B,
               "interleaved": ScheduleKind.INTERLEAVED_1F1B, "interleaved1f1b": ScheduleKind.INTERLEAVED_1F1B,
               "zbh1": ScheduleKind.ZB_H1, "zbh2": ScheduleKind.ZB_H2, "zbv": ScheduleKind.ZB_V,
               "dualpipev": ScheduleKind.DUALPIPE_V, "dualpipe": ScheduleKind.DUALPIPE_V}
GENERATORS = tuple(k for k in ScheduleKind if k != ScheduleKind.CUSTOM)

# A ScheduleKind, its int value or a name ("1f1b", "zbv"), or a SCHEDULE plugin's kind (its id >= 64
# or its entry of a loaded plugin).
ScheduleKindLike = Union[ScheduleKind, int, str, Any]
# A file name.
PathLike = Union[str, bytes, os.PathLike]
# A per-stage cost: one number for every stage, a sequence of S values, or None for the default.
PerStage = Union[float, Sequence[float], None]
# A stage callback: fn(kind, stage, microbatch, input, output), input/output numpy arrays or None.
StageFn = Callable[[Any, int, int, Any, Any], Any]


def as_schedule_kind(kind: ScheduleKindLike) -> Union[ScheduleKind, int]:
    """ScheduleKind from a ScheduleKind, its int value or a name ("1f1b", "zbv", "ZB_H1", ...); a
    SCHEDULE plugin's kind (an id >= 64, or its entry of a loaded plugin) as its int."""
    if isinstance(kind, ScheduleKind):
        return kind
    if names_extension(kind):
        return extension_id(kind, "schedule kind")
    if isinstance(kind, int) and not isinstance(kind, bool) and kind in ScheduleKind._value2member_map_:
        return ScheduleKind(kind)
    if isinstance(kind, str):
        key = kind.strip().lower()
        if key.upper() in ScheduleKind.__members__:
            return ScheduleKind[key.upper()]
        key = key.replace("_", "").replace("-", "")
        if key in _KIND_NAMES:
            return _KIND_NAMES[key]
    raise InvalidArgument("schedule kind %r: expected a weft.ScheduleKind or one of %s"
                          % (kind, ", ".join(sorted(_KIND_NAMES))))


_ACTION_RE = re.compile(r"^\s*(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|REDUCE_GRAD|F|B|I|W)(\d*)\s*$")


class _ActionFields(NamedTuple):
    kind: ActionKind
    stage: int
    microbatch: int


class Action(_ActionFields):
    """One action {kind, stage, microbatch} (microbatch -1 for REDUCE_GRAD). str() is torch's
    string ("0F0", "1SEND_B2", "3REDUCE_GRAD"); Action.parse() reads one."""

    __slots__ = ()

    def __new__(cls, kind: Union[ActionKind, int, str], stage: int, microbatch: int = -1) -> Action:
        if isinstance(kind, str):
            kind = kind.upper()
            if kind not in ActionKind.__members__:
                raise InvalidArgument("action kind %r: expected one of %s" % (kind, ", ".join(ActionKind.__members__)))
            kind = ActionKind[kind]
        return super().__new__(cls, ActionKind(kind), int(stage), int(microbatch))

    def __str__(self):
        if self.kind == ActionKind.REDUCE_GRAD:
            return "%dREDUCE_GRAD" % self.stage
        return "%d%s%d" % (self.stage, self.kind.name, self.microbatch)

    @classmethod
    def parse(cls, text: str) -> Action:
        """The Action that torch's string `text` names ("2I3"); weft.InvalidArgument otherwise."""
        m = _ACTION_RE.match(str(text))
        if not m or (m.group(2) == "REDUCE_GRAD") == bool(m.group(3)):
            raise InvalidArgument("action %r: expected torch's form <stage><kind><microbatch> (\"0F1\", \"2SEND_B0\") "
                                  "or <stage>REDUCE_GRAD" % (text,))
        return cls(ActionKind[m.group(2)], int(m.group(1)), int(m.group(3)) if m.group(3) else -1)


def _as_action(a, where):
    if isinstance(a, Action):
        return a
    if isinstance(a, str):
        return Action.parse(a)
    try:
        return Action(*a)
    except (TypeError, ValueError) as e:
        raise InvalidArgument("%s: %r is not an action (expected weft.Action, (kind, stage, microbatch) or a "
                              "string such as \"0F1\"): %s" % (where, a, e)) from None


class ScheduleInfo(NamedTuple):
    """weft_schedule_info_t: the generator (or CUSTOM), p, S, m and the most stages a rank holds."""

    kind: Union[ScheduleKind, int]
    ranks: int
    stages: int
    microbatches: int
    stages_per_rank: int


class RankStats(NamedTuple):
    """weft_rank_stats_t: time in compute actions, makespan - busy, most micro-batch activations
    held at once, and those in bytes (simulation only)."""

    busy: float
    idle: float
    peak_activations: int
    peak_activation_bytes: float


class Candidate(NamedTuple):
    """weft_tune_candidate_t: one (kind, m, v) the tuner simulated."""

    kind: Union[ScheduleKind, int]
    microbatches: int
    stages_per_rank: int
    microbatch_size: int
    step_time: float
    bubble_fraction: float
    peak_bytes: float
    fits: bool


class TuneResult(NamedTuple):
    """weft.tune()'s answer: every candidate, sorted by step time (those that fit first), and the
    fastest that fits (a Candidate) or None when none fits."""

    candidates: List[Candidate]
    best: Optional[Candidate]


def _path(path):
    p = os.fspath(path)
    if isinstance(p, str):
        p = p.encode("utf-8")
    if not p:
        raise InvalidArgument("path is empty; expected a file path")
    return p


def _kind_of(value):
    """A kind weft reported: a ScheduleKind, or the int of a SCHEDULE plugin's kind (>= 64)."""
    return ScheduleKind(value) if value in ScheduleKind._value2member_map_ else int(value)


def _doubles(values, n, what, required=False):
    """A C double array of n entries from a number (repeated) or a sequence; None stays None."""
    if values is None:
        if required:
            raise InvalidArgument("%s is required: one value per stage (%d), or one number for all" % (what, n))
        return None
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = [float(values)] * n
    values = [float(v) for v in values]
    if len(values) != n:
        raise InvalidArgument("%s: %d values; expected one per stage (%d)" % (what, len(values), n))
    return (ctypes.c_double * max(1, n))(*values)


# ------------------------------------------------------------------ schedules

# An action as from_actions takes it: a weft.Action, a (kind, stage, microbatch) tuple or torch's string "0F1".
ActionLike = Union[Action, Tuple[Any, ...], str]


class Schedule(Handle):
    """An immutable pipeline schedule (weft_schedule_t). Make one with generate(), from_actions(),
    from_csv() or load(); close() (also `with` and collection) frees it. Pipelines and timelines
    made from it keep what they need: it may be closed first."""

    def __init__(self, _handle: int) -> None:
        self._handle = _handle
        info = _lib.weft_schedule_info_t(ctypes.sizeof(_lib.weft_schedule_info_t))
        try:
            _errors.check(_lib.fn("weft_schedule_info")(self._handle, ctypes.byref(info)))
        except BaseException:
            _lib.fn("weft_schedule_destroy")(self._handle)
            self._handle = None
            raise
        self._info = ScheduleInfo(_kind_of(info.kind), info.ranks, info.stages, info.microbatches,
                                  info.stages_per_rank)

    @classmethod
    def _made_by(cls, fn, *args):
        out = ctypes.c_void_p()
        _errors.check(_lib.fn(fn)(*args, ctypes.byref(out)))
        return cls(out.value)

    @classmethod
    def generate(cls, kind: ScheduleKindLike, ranks: int, microbatches: int, stages_per_rank: int = 0,
                 reduce_grad: bool = False) -> Schedule:
        """weft_schedule_generate(): `kind` (a ScheduleKind or a name: "gpipe", "1f1b",
        "interleaved", "zbh1", "zbh2", "zbv", "dualpipev") for p = ranks and m = microbatches;
        stages_per_rank 0 = the method's own; reduce_grad adds REDUCE_GRAD actions."""
        cfg = _lib.weft_schedule_config_t(ctypes.sizeof(_lib.weft_schedule_config_t), int(ranks), int(microbatches),
                                          int(stages_per_rank), 1 if reduce_grad else 0)
        return cls._made_by("weft_schedule_generate", int(as_schedule_kind(kind)), ctypes.byref(cfg))

    @classmethod
    def from_actions(cls, lists: Iterable[Iterable[ActionLike]]) -> Schedule:
        """weft_schedule_create(): one list per rank of weft.Action, (kind, stage, microbatch)
        tuples or torch strings ("0F0"). Compute-only lists get their SEND/RECV actions added."""
        lists = [list(rank_list) for rank_list in lists]
        if not lists:
            raise InvalidArgument("Schedule.from_actions: no rank lists given; expected one list per rank")
        arrays = []
        for r, rank_list in enumerate(lists):
            acts = [_as_action(a, "rank %d, action %d" % (r, i)) for i, a in enumerate(rank_list)]
            arrays.append((_lib.weft_action_t * max(1, len(acts)))(*[(int(a.kind), a.stage, a.microbatch)
                                                                     for a in acts]))
        ptrs = (ctypes.POINTER(_lib.weft_action_t) * len(lists))(
            *[ctypes.cast(a, ctypes.POINTER(_lib.weft_action_t)) for a in arrays])
        counts = (ctypes.c_size_t * len(lists))(*[len(rank_list) for rank_list in lists])
        return cls._made_by("weft_schedule_create", len(lists), ptrs, counts)

    @classmethod
    def from_csv(cls, text: Union[str, bytes]) -> Schedule:
        """weft_schedule_from_csv(): torch's CSV (str or bytes; either form)."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        buf = ctypes.create_string_buffer(data, len(data) + 1)
        return cls._made_by("weft_schedule_from_csv", buf, len(data))

    @classmethod
    def load(cls, path: PathLike) -> Schedule:
        """weft_schedule_load(): a schedule file written by save()."""
        return cls._made_by("weft_schedule_load", _path(path))

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the schedule is closed")
        return h

    @property
    def info(self) -> ScheduleInfo:
        """ScheduleInfo(kind, ranks, stages, microbatches, stages_per_rank)."""
        return self._info

    @property
    def ranks(self) -> int:
        """p: the pipeline ranks the schedule is for."""
        return self._info.ranks

    @property
    def stages(self) -> int:
        """S: the number of stages."""
        return self._info.stages

    @property
    def microbatches(self) -> int:
        """m: the micro-batches per step."""
        return self._info.microbatches

    @property
    def kind(self) -> Union[ScheduleKind, int]:
        """The generator (CUSTOM for action lists and CSV), or a SCHEDULE plugin's kind as an int."""
        return self._info.kind

    def actions(self, rank: int) -> List[Action]:
        """weft_schedule_actions(): rank `rank`'s actions in order, a list of weft.Action."""
        ptr, n = ctypes.POINTER(_lib.weft_action_t)(), ctypes.c_size_t()
        _errors.check(_lib.fn("weft_schedule_actions")(self._h(), int(rank), ctypes.byref(ptr), ctypes.byref(n)))
        return [Action(ptr[i].kind, ptr[i].stage, ptr[i].microbatch) for i in range(n.value)]

    def all_actions(self) -> List[List[Action]]:
        """[actions(r) for every rank]."""
        return [self.actions(r) for r in range(self.ranks)]

    def stage_rank(self, stage: int) -> int:
        """weft_schedule_stage_rank(): the rank that holds `stage` (-1: no rank runs its forward)."""
        r = ctypes.c_int()
        _errors.check(_lib.fn("weft_schedule_stage_rank")(self._h(), int(stage), ctypes.byref(r)))
        return r.value

    def stages_of(self, rank: int) -> List[int]:
        """The stages rank `rank` holds, ascending."""
        return [s for s in range(self.stages) if self.stage_rank(s) == rank]

    def validate(self) -> None:
        """weft_schedule_validate(): returns None, or raises weft.InvalidArgument naming the rank,
        the action and the rule broken."""
        _errors.check(_lib.fn("weft_schedule_validate")(self._h()))

    def is_valid(self) -> bool:
        """validate() as a bool."""
        try:
            self.validate()
        except InvalidArgument:
            return False
        return True

    def to_csv(self, compute_only: bool = False) -> str:
        """weft_schedule_to_csv(): torch's CSV as a str (rows ended by "\\r\\n")."""
        f = _lib.fn("weft_schedule_to_csv")
        fmt = 1 if compute_only else 0
        n = ctypes.c_size_t()
        _errors.check(f(self._h(), fmt, None, 0, ctypes.byref(n)))
        buf = ctypes.create_string_buffer(n.value + 1)
        _errors.check(f(self._h(), fmt, buf, n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8")

    def save(self, path: PathLike) -> None:
        """weft_schedule_save(): a FlatBuffers file that load() reads."""
        _errors.check(_lib.fn("weft_schedule_save")(self._h(), _path(path)))

    def simulate(self, forward: PerStage, backward: PerStage = None, backward_input: PerStage = None,
                 backward_weight: PerStage = None, activation_bytes: PerStage = None,
                 weight_grad_bytes: PerStage = None, boundary_bytes: PerStage = None, latency: float = 0.0,
                 bandwidth: float = 0.0, overhead: float = 0.0, reduce_grad: PerStage = None, cost_model: Any = None,
                 microbatch_size: int = 1) -> Timeline:
        """weft_schedule_simulate(): a Timeline of this (valid) schedule under the costs. Each
        per-stage cost is a sequence of S values or one number for every stage; None = the
        default pipeline.h states (backward = I + W; I and W = half of B; bytes 0).
        cost_model: a COST_MODEL plugin entry (or its id) that gives every compute action's time
        (forward may then be None); microbatch_size is passed to it."""
        model = extension_id(cost_model, "cost_model")
        n = self.stages
        arrays = {k: _doubles(v, n, k, required=(k == "forward" and not model)) for k, v in (
            ("forward", forward), ("backward", backward), ("backward_input", backward_input),
            ("backward_weight", backward_weight), ("activation_bytes", activation_bytes),
            ("weight_grad_bytes", weight_grad_bytes), ("boundary_bytes", boundary_bytes),
            ("reduce_grad", reduce_grad))}
        dp = ctypes.POINTER(ctypes.c_double)
        ptrs = {k: (ctypes.cast(a, dp) if a is not None else None) for k, a in arrays.items()}
        costs = _lib.weft_pipeline_costs_t(ctypes.sizeof(_lib.weft_pipeline_costs_t), n, ptrs["forward"],
                                           ptrs["backward"], ptrs["backward_input"], ptrs["backward_weight"],
                                           ptrs["activation_bytes"], ptrs["weight_grad_bytes"],
                                           ptrs["boundary_bytes"], float(latency), float(bandwidth), float(overhead),
                                           ptrs["reduce_grad"], model, int(microbatch_size))
        out = ctypes.c_void_p()
        _errors.check(_lib.fn("weft_schedule_simulate")(self._h(), ctypes.byref(costs), ctypes.byref(out)))
        return Timeline(out.value)

    def close(self) -> None:
        """weft_schedule_destroy(). Idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_schedule_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Schedule closed>"
        i = self._info
        kind = i.kind.name.lower() if isinstance(i.kind, ScheduleKind) else "plugin kind %d" % i.kind
        return "<weft.Schedule %s: %d ranks, %d stages, %d microbatches>" % (kind, i.ranks, i.stages,
                                                                             i.microbatches)


# ------------------------------------------------------------------ timelines

class Timeline(Handle):
    """Start and end times of every action of every rank (weft_timeline_t), simulated
    (Schedule.simulate) or measured (Pipeline.run with record=True)."""

    def __init__(self, _handle: int) -> None:
        self._handle = _handle
        info = _lib.weft_timeline_info_t(ctypes.sizeof(_lib.weft_timeline_info_t))
        try:
            _errors.check(_lib.fn("weft_timeline_info")(self._handle, ctypes.byref(info)))
        except BaseException:
            _lib.fn("weft_timeline_destroy")(self._handle)
            self._handle = None
            raise
        self._ranks, self._makespan, self._bubble = info.ranks, info.makespan, info.bubble_fraction

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the timeline is closed")
        return h

    @property
    def ranks(self) -> int:
        """The number of ranks."""
        return self._ranks

    @property
    def makespan(self) -> float:
        """The latest end over all ranks."""
        return self._makespan

    @property
    def bubble_fraction(self) -> float:
        """idle / (ranks * makespan)."""
        return self._bubble

    def rank(self, rank: int) -> Tuple[Any, Any, RankStats]:
        """weft_timeline_rank(): (starts, ends, RankStats) of rank `rank`: float64 numpy arrays
        (copies), one entry per action of the schedule's list for that rank."""
        import numpy as np
        s, e = ctypes.POINTER(ctypes.c_double)(), ctypes.POINTER(ctypes.c_double)()
        n = ctypes.c_size_t()
        st = _lib.weft_rank_stats_t(ctypes.sizeof(_lib.weft_rank_stats_t))
        _errors.check(_lib.fn("weft_timeline_rank")(self._h(), int(rank), ctypes.byref(s), ctypes.byref(e),
                                                    ctypes.byref(n), ctypes.byref(st)))
        starts = np.ctypeslib.as_array(s, (n.value,)).copy() if n.value else np.zeros(0)
        ends = np.ctypeslib.as_array(e, (n.value,)).copy() if n.value else np.zeros(0)
        return starts, ends, RankStats(st.busy, st.idle, st.peak_activations, st.peak_activation_bytes)

    def write_svg(self, path: PathLike) -> None:
        """weft_timeline_write(SVG): ranks as rows, actions as boxes."""
        _errors.check(_lib.fn("weft_timeline_write")(self._h(), 0, _path(path)))

    def write_chrome_trace(self, path: PathLike) -> None:
        """weft_timeline_write(CHROME_TRACE): JSON for chrome://tracing and Perfetto."""
        _errors.check(_lib.fn("weft_timeline_write")(self._h(), 1, _path(path)))

    def close(self) -> None:
        """weft_timeline_destroy(). Idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_timeline_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Timeline closed>"
        return "<weft.Timeline %d ranks, makespan %g, bubble %.3f>" % (self._ranks, self._makespan, self._bubble)


# ------------------------------------------------------------------ tuning

def tune(ranks: int, layer_forward: Sequence[float], layer_backward: Sequence[float], global_batch: int,
         microbatch_overhead: float = 0.0, activation_bytes_per_sample: float = 0.0,
         boundary_bytes_per_sample: float = 0.0, latency: float = 0.0, bandwidth: float = 0.0,
         memory_cap: float = 0.0, static_bytes: float = 0.0, kinds: Optional[Iterable[ScheduleKindLike]] = None,
         max_stages_per_rank: int = 0, max_microbatches: int = 0, cost_model: Any = None) -> TuneResult:
    """weft_schedule_tune(): simulates every allowed (kind, m, v) for a model of len(layer_forward)
    layers (per-sample times per layer) and returns TuneResult(candidates, best). kinds: the
    generators to try (names or ScheduleKind; None = all). Schedule.generate(best.kind, ranks,
    best.microbatches, best.stages_per_rank) makes the winner. cost_model: a COST_MODEL plugin
    entry (or its id) that gives the stage times instead of the layer tables (which may then be
    empty)."""
    fwd = [float(x) for x in layer_forward]
    bwd = [float(x) for x in layer_backward]
    if len(fwd) != len(bwd):
        raise InvalidArgument("tune: %d forward and %d backward layer times; expected one of each per layer"
                              % (len(fwd), len(bwd)))
    c_fwd = (ctypes.c_double * max(1, len(fwd)))(*fwd)
    c_bwd = (ctypes.c_double * max(1, len(bwd)))(*bwd)
    c_kinds = None
    nkinds = 0
    if kinds is not None:
        ks = [int(as_schedule_kind(k)) for k in kinds]
        c_kinds, nkinds = (ctypes.c_int * max(1, len(ks)))(*ks), len(ks)
    dp = ctypes.POINTER(ctypes.c_double)
    cfg = _lib.weft_tune_config_t(ctypes.sizeof(_lib.weft_tune_config_t), int(ranks), len(fwd),
                                  ctypes.cast(c_fwd, dp), ctypes.cast(c_bwd, dp), int(global_batch),
                                  float(microbatch_overhead), float(activation_bytes_per_sample),
                                  float(boundary_bytes_per_sample), float(latency), float(bandwidth),
                                  float(memory_cap), float(static_bytes),
                                  ctypes.cast(c_kinds, ctypes.POINTER(ctypes.c_int)) if c_kinds is not None else None,
                                  nkinds, int(max_stages_per_rank), int(max_microbatches),
                                  extension_id(cost_model, "cost_model"))
    f = _lib.fn("weft_schedule_tune")
    count, best = ctypes.c_size_t(), ctypes.c_int(-1)
    _errors.check(f(ctypes.byref(cfg), None, 0, ctypes.byref(count), ctypes.byref(best)))
    arr = (_lib.weft_tune_candidate_t * max(1, count.value))()
    _errors.check(f(ctypes.byref(cfg), arr, count.value, ctypes.byref(count), ctypes.byref(best)))
    cands = [Candidate(_kind_of(c.kind), c.microbatches, c.stages_per_rank, c.microbatch_size, c.step_time,
                       c.bubble_fraction, c.peak_bytes, bool(c.fits)) for c in arr[:count.value]]
    return TuneResult(cands, cands[best.value] if 0 <= best.value < len(cands) else None)


# ------------------------------------------------------------------ the executor

_live = weakref.WeakSet()  # pipelines, closed at exit before the communicators


def _close_all():
    for p in list(_live):
        try:
            p.close()
        except Exception:
            pass


def _boundary(spec, i):
    """(numpy template, DType) of boundary i from (shape, dtype), a numpy array or a CPU torch tensor."""
    import numpy as np
    if hasattr(spec, "shape") and hasattr(spec, "dtype") and not isinstance(spec, tuple):
        if getattr(getattr(spec, "device", None), "type", "cpu") != "cpu":
            raise _errors.Unsupported("boundaries[%d]: a %s tensor; the Python binding moves host boundaries only"
                                      % (i, spec.device.type))
        shape, dtype = tuple(int(n) for n in spec.shape), spec.dtype
    else:
        try:
            shape, dtype = spec
            shape = (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)
        except (TypeError, ValueError):
            raise InvalidArgument("boundaries[%d] = %r: expected (shape, dtype), a numpy array or a torch tensor"
                                  % (i, spec)) from None
    dt = as_dtype(dtype)
    return np.zeros(shape, dtype=_TYPESTR[dt]), dt


_CALLBACKS = ("forward", "backward", "backward_input", "backward_weight", "reduce_grad")
_KIND_CALLBACK = {ActionKind.F: "forward", ActionKind.B: "backward", ActionKind.I: "backward_input",
                  ActionKind.W: "backward_weight", ActionKind.REDUCE_GRAD: "reduce_grad"}


class Pipeline(Handle):
    """The executor (weft_pipeline_t): runs this rank's list of `schedule` over `comm`, calling
    the stage callbacks for compute actions and moving the boundaries between ranks.

        def forward(kind, stage, microbatch, input, output): ...   # output[...] = f(input)
        pipe = weft.Pipeline(comm, schedule, forward=forward, backward=backward,
                             boundaries=[((8, 16), "float32")] * (schedule.stages - 1))
        pipe.run()

    Collective over `comm` (its size = the schedule's ranks). Each callback is called as
    fn(kind, stage, microbatch, input, output) with kind an ActionKind and input/output numpy
    arrays over weft's host buffers of the boundary's shape and dtype (bfloat16 as uint16
    storage), or None where pipeline.h gives none (stage 0's F input, the last stage's F output,
    ...). An F input stays unchanged until the backward (B or I) of the same (stage, microbatch)
    has returned; every other view is valid only during the call (copy what you keep). A
    callback's return value is ignored; an exception stops the run, whose error (a
    weft.WeftError, with the exception as __cause__) names the action and carries the
    exception's text. boundaries: S - 1 entries, each (shape, dtype), a numpy array or a CPU
    torch tensor (only shape and dtype are used). record=True (on every rank): run() returns
    the Timeline of the step for all ranks."""

    def __init__(self, comm: Comm, schedule: Schedule, forward: StageFn, backward: Optional[StageFn] = None,
                 backward_input: Optional[StageFn] = None, backward_weight: Optional[StageFn] = None,
                 reduce_grad: Optional[StageFn] = None, boundaries: Sequence[Any] = (), record: bool = False) -> None:
        self._handle = None
        if not isinstance(comm, Comm):
            raise InvalidArgument("Pipeline(comm=...): expected a weft.Comm, got %r" % (comm,))
        if not isinstance(schedule, Schedule):
            raise InvalidArgument("Pipeline(schedule=...): expected a weft.Schedule, got %r" % (schedule,))
        fns = dict(forward=forward, backward=backward, backward_input=backward_input,
                   backward_weight=backward_weight, reduce_grad=reduce_grad)
        for name, f in fns.items():
            if f is not None and not callable(f):
                raise InvalidArgument("Pipeline(%s=%r): expected a callable or None" % (name, f))
        if forward is None:
            raise InvalidArgument("Pipeline: forward is required")
        self._comm, self._schedule, self._fns, self._record = comm, schedule, fns, bool(record)
        templates = [_boundary(b, i) for i, b in enumerate(boundaries)]
        self._shapes = [(t.shape, dt) for t, dt in templates]
        c_bounds = (_lib.weft_tensor_t * max(1, len(templates)))()
        self._shape_arrays = []
        for i, (t, dt) in enumerate(templates):
            shape = (ctypes.c_int64 * max(1, t.ndim))(*t.shape)
            self._shape_arrays.append(shape)
            c_bounds[i] = _lib.weft_tensor_t(t.ctypes.data, _lib.DEVICE_CPU, 0, t.ndim, int(dt),
                                             ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), None, 0)
        self._failure = None  # the exception of the callback that stopped the run
        # The C function pointers must outlive the pipeline: weft calls them on every run.
        self._trampoline = _lib.STAGE_FN(self._call)
        cfg = _lib.weft_pipeline_config_t(ctypes.sizeof(_lib.weft_pipeline_config_t))
        for name in _CALLBACKS:
            if fns[name] is not None:
                setattr(cfg, name, self._trampoline)
        cfg.boundaries = ctypes.cast(c_bounds, ctypes.POINTER(_lib.weft_tensor_t))
        cfg.nboundaries = len(templates)
        cfg.record = 1 if record else 0
        out = ctypes.c_void_p()
        with comm._lock:
            _errors.check(_lib.fn("weft_pipeline_create")(comm._h(), schedule._h(), ctypes.byref(cfg),
                                                          ctypes.byref(out)))
        self._handle = out.value
        _live.add(self)

    def _view(self, tensor_p):
        if not tensor_p:
            return None
        t = tensor_p.contents
        shape = tuple(t.shape[k] for k in range(t.ndim))
        return _memory_view(t.data, shape, t.dtype, self)

    def _call(self, call_p, _user_data):
        # Runs inside weft_pipeline_run: nothing may escape into ctypes (which would print it and
        # return 0 = WEFT_OK), so every exception becomes a status and the text weft reports.
        try:
            c = call_p.contents
            kind = ActionKind(c.kind)
            fn = self._fns[_KIND_CALLBACK[kind]]
            fn(kind, c.stage, c.microbatch, self._view(c.input), self._view(c.output))
            return int(Status.OK)
        except BaseException as e:  # noqa: B902 (KeyboardInterrupt too: re-raised after the run)
            self._failure = e
            text = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
            try:
                _lib.fn("weft_pipeline_set_error")(text.encode("utf-8", "replace"))
            except BaseException:
                pass
            if isinstance(e, WeftError) and isinstance(e.status, Status) and e.status != Status.OK:
                return int(e.status)
            return int(Status.OUT_OF_MEMORY if isinstance(e, MemoryError) else Status.INVALID_ARGUMENT)

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the pipeline is closed")
        return h

    @property
    def schedule(self) -> Schedule:
        """The schedule this pipeline runs."""
        return self._schedule

    @property
    def comm(self) -> Comm:
        """The communicator it runs over."""
        return self._comm

    @property
    def boundaries(self) -> List[Tuple[Tuple[int, ...], DType]]:
        """[(shape, DType)] of the S - 1 boundaries."""
        return list(self._shapes)

    def run(self) -> Optional[Timeline]:
        """weft_pipeline_run(): one step. Returns the step's Timeline (record=True) or None."""
        self._failure = None
        out = ctypes.c_void_p()
        with self._comm._lock:
            status = _lib.fn("weft_pipeline_run")(self._h(), ctypes.byref(out) if self._record else None)
            failure, self._failure = self._failure, None
            if status != Status.OK:
                try:
                    _errors.check(status)
                except WeftError as err:
                    if failure is not None and not isinstance(failure, Exception):
                        raise failure from err  # KeyboardInterrupt, SystemExit: the caller's own
                    raise err from failure
        if failure is not None:  # a failed callback must not pass unnoticed, whatever weft said
            raise _errors.InternalError("a stage callback failed but weft_pipeline_run returned OK: %s"
                                        % failure) from failure
        return Timeline(out.value) if self._record and out.value else None

    def close(self) -> None:
        """weft_pipeline_destroy(). Not collective; idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_pipeline_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Pipeline closed>"
        return "<weft.Pipeline rank %d of %r>" % (self._comm.rank, self._schedule)


__all__ = ["Action", "ActionKind", "Candidate", "GENERATORS", "Pipeline", "RankStats", "Schedule", "ScheduleInfo",
           "ScheduleKind", "Timeline", "TuneResult", "as_schedule_kind", "tune"]
