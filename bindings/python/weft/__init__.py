"""weft: Python binding of libweft.so's C ABI (weft.h), through ctypes.

    import weft, numpy as np
    with weft.Comm.from_env() as comm:          # under weftrun, torchrun, mpirun, srun
        x = np.arange(4, dtype=np.float32)
        comm.allreduce(x)                       # in place, blocking
        req = comm.allgather(x, np.empty(4 * comm.size, np.float32), async_op=True)
        out = req.wait()

Meshes and sharded tensors (weft/mesh.h):

    mesh = weft.Mesh(comm, (2, 2), ("dp", "tp"))
    x = weft.ShardedTensor(mesh, (8, 6), [weft.Replicate(), weft.Shard(0)], local_array)
    y = weft.ShardedTensor.zeros(mesh, (8, 6), [weft.Replicate(), weft.Replicate()], "float32")
    weft.redistribute(x, y)                     # all-gather over "tp"
    print(weft.plan(x, y))
    weft.save(comm, "ckpt", {"w": x}); weft.load("ckpt", {"w": y})

Training parallelism (weft/training.h):

    b = weft.Bucketer(comm, grads, bucket_bytes=1 << 20)        # data-parallel gradient buckets
    b.mark_ready(i); b.finish()
    zero = weft.Zero(mesh, "dp", params, stage=2, optimizer=weft.AdamW(lr=1e-3))
    zero.grad_ready(i, grad); info = zero.step()
    weft.region_apply(mesh, "tp", "copy", True, 0, grad, out)   # Megatron regions
    weft.ring_shift(mesh, "cp", 1, kv, kv_next, async_op=True)  # context-parallel rings

Pipeline schedules (weft/pipeline.h):

    s = weft.Schedule.generate("zbv", ranks=4, microbatches=8)   # or from_actions / from_csv / load
    s.validate(); print(s.to_csv()); t = s.simulate(forward=1.0, backward=2.0); t.write_svg("zbv.svg")
    pipe = weft.Pipeline(comm, s, forward=f, backward_input=i, backward_weight=w, boundaries=[...])
    pipe.run()                                  # weft.torch_pipeline runs torch stage modules

Expert parallelism (weft/moe.h):

    r = weft.route(logits, experts=8, topk=2)                   # indices, weights, losses
    moe = weft.Moe(comm, experts=8, hidden=16)
    with moe.dispatch(x, r.indices, r.weights) as h:            # h.tokens, h.counts, h.offsets
        out = moe.combine(h, expert_math(h.tokens))             # weft.torch_moe: autograd
                                                                # Functions and a MoELayer

Plugins (weft/plugin.h):

    p = weft.load_plugin(path); p.call("entry", 1, 2.0)          # by the manifest's signature
    comm.allreduce(x, op=p.entry("absmax"))                     # a plugin's reduction operator
    op = weft.register_op(lambda d, a, b: np.maximum(a, b, out=d), dtypes=["float32"])

The planner (weft/plan.h): parallel layouts ranked by predicted step time, Amdahl and Gustafson:

    layers = [weft.PlanLayer("block", count=4, params=1e6, forward_seconds=1e-4, output_bytes=1024)]
    cluster = weft.PlanCluster(ranks_per_host=8, memory_per_rank=16e9, intra_bandwidth=1e10)
    with weft.plan_layouts(layers, cluster, global_batch=64) as p:   # or weft.LayoutPlan.load(model, cluster)
        print(p.table(), p.report()); best = p.best                  # a weft.PlanLayout

``import weft.torch`` registers the torch.distributed backend "weft"; weft.torch_parallel has the
torch.autograd.Functions of the regions and ring attention.
"""

import atexit as _atexit

from ._buffers import Buffer, DType, as_buffer, as_dtype, dtype_size
from ._comm import (AVG, IN_PLACE, MAX, MIN, PROD, SPLIT_NOCOLOR, SUM, Comm, Op, P2POp, Request, UniqueId, as_op,
                    get_unique_id, version, wait_all)
from ._errors import (Aborted, InternalError, InvalidArgument, Mismatch, OutOfMemory, RemoteError, Status, Timeout,
                      TransportError, Unsupported, WeftError, status_string)
from ._lib import ABI_VERSION, LibraryNotFoundError
from ._mesh import Layout, Mesh, Partial, Placement, Replicate, Shard, local_box, local_shape
from ._sharded import Plan, ShardedTensor, Step, StepKind, TensorView, full, plan, redistribute
from ._checkpoint import Checkpoint, CheckpointTensor, load, save
from ._training import WIRE_FP8_BLOCK, Bucketer, BucketerStats, Reduction, Wire, as_wire
from ._zero import SGD, Adam, AdamW, StepInfo, Zero, ZeroMemory
from ._regions import Region, as_region, chunk_range, out_shape, region_apply, region_op, ring_shift
from ._pipeline import (GENERATORS, Action, ActionKind, Candidate, Pipeline, RankStats, Schedule, ScheduleInfo,
                        ScheduleKind, Timeline, TuneResult, as_schedule_kind, tune)
from ._moe import (DROPPED, Drop, Moe, MoeHandle, RouteResult, RouterConfig, RouterScore, layout, route,
                   router_backward, update_bias)
from ._moe import Layout as MoeLayout
from ._plugin import Closure, Plugin, PluginEntry, PluginKind, ValueType, as_value_type, load_plugin
from ._user_ops import UserOp, destroy_op, register_op
from ._plan import (LayoutPlan, PlanCluster, PlanCollective, PlanCollectiveKind, PlanInfo, PlanLayer, PlanLayout,
                    PlanScaling, ScalingPoint, plan_layouts)
from ._lib import path as library_path

__version__ = "0.1.0"

__all__ = [
    "AVG", "ABI_VERSION", "Aborted", "Buffer", "Comm", "DType", "IN_PLACE", "InternalError", "InvalidArgument",
    "LibraryNotFoundError", "MAX", "MIN", "Mismatch", "Op", "OutOfMemory", "P2POp", "PROD", "RemoteError", "Request",
    "SPLIT_NOCOLOR", "SUM", "Status", "Timeout", "TransportError", "UniqueId", "Unsupported", "WeftError",
    "as_buffer", "as_dtype", "as_op", "dtype_size", "get_unique_id", "library_path", "status_string", "version",
    "wait_all",
    "Checkpoint", "CheckpointTensor", "Layout", "Mesh", "Partial", "Placement", "Plan", "Replicate", "Shard",
    "ShardedTensor", "Step", "StepKind", "TensorView", "full", "load", "local_box", "local_shape", "plan",
    "redistribute", "save",
    "Adam", "AdamW", "Bucketer", "BucketerStats", "Reduction", "Region", "SGD", "StepInfo", "WIRE_FP8_BLOCK", "Wire",
    "Zero", "ZeroMemory", "as_region", "as_wire", "chunk_range", "out_shape", "region_apply", "region_op", "ring_shift",
    "Action", "ActionKind", "Candidate", "GENERATORS", "Pipeline", "RankStats", "Schedule", "ScheduleInfo",
    "ScheduleKind", "Timeline", "TuneResult", "as_schedule_kind", "tune",
    "DROPPED", "Drop", "Moe", "MoeHandle", "MoeLayout", "RouteResult", "RouterConfig", "RouterScore", "layout", "route",
    "router_backward", "update_bias",
    "Closure", "Plugin", "PluginEntry", "PluginKind", "UserOp", "ValueType", "as_value_type", "destroy_op",
    "load_plugin", "register_op",
    "LayoutPlan", "PlanCluster", "PlanCollective", "PlanCollectiveKind", "PlanInfo", "PlanLayer", "PlanLayout",
    "PlanScaling", "ScalingPoint", "plan_layouts",
]

for _name in ("FLOAT64", "FLOAT32", "FLOAT16", "BFLOAT16", "FP8_E4M3", "FP8_E5M2", "INT8", "UINT8", "INT32",
              "UINT32", "INT64", "UINT64"):
    globals()[_name] = DType[_name]
    __all__.append(_name)
del _name


def _at_exit():
    from ._comm import _close_all
    from ._mesh import _close_all as _close_meshes
    from ._training import _close_all as _close_training
    from ._pipeline import _close_all as _close_pipelines
    from ._moe import _close_all as _close_moe
    _close_moe()  # MoE objects with their handles; not collective
    _close_pipelines()  # executors hold their communicator; not collective
    _close_training()  # bucketers and ZeRO handles; not collective
    _close_meshes()  # with their sharded tensors; not collective
    _close_all()


_atexit.register(_at_exit)


class LibraryNotFoundWarning(RuntimeWarning):
    """Issued once by ``import weft`` when libweft.so cannot be loaded (the package still imports,
    so help() and type checkers work; the first call raises LibraryNotFoundError)."""


def _warn_if_library_missing():
    import warnings
    try:
        _lib_module.lib()
    except LibraryNotFoundError as e:
        warnings.warn(LibraryNotFoundWarning("weft: %s" % e), stacklevel=3)


from . import _lib as _lib_module  # noqa: E402

_warn_if_library_missing()
__all__.append("LibraryNotFoundWarning")
