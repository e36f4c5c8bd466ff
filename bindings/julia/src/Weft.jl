"""
    Weft

Julia binding of libweft, the distributed deep-learning backend. It talks only to weft's C
ABI (`weft.h`) through `ccall` (see `src/capi.jl` for the raw wrappers, one per C function).

    using Weft
    comm = Comm()                          # from the launcher: weftrun -n 4 julia prog.jl
    x = fill(Float32(Weft.rank(comm)), 4)
    allreduce!(comm, x, Weft.SUM)          # in place
    close(comm)

Collectives work on `DenseArray{T}` (`Array`, `Vector`, ...) for `T` in Float64, Float32,
Float16, Int8, UInt8, Int32, UInt32, Int64, UInt64. Blocking forms return the receive buffer;
`async=true` returns a [`Request`](@ref) (`wait(req)`, `Weft.test(req)`), which keeps the arrays
alive until it completes. Failures throw [`WeftError`](@ref).

Training parallelism (`weft/training.h`, src/training.jl): the gradient [`Bucketer`](@ref)
(`Weft.mark_ready!`, `Weft.finish!`), [`Zero`](@ref) (ZeRO stages 0-3: `Weft.gather!`,
`Weft.param`, `Weft.grad_ready!`, `Weft.step!`), [`region_apply!`](@ref) (Megatron's regions) and
[`ring_shift!`](@ref) (context parallelism).

Pipeline parallelism (`weft/pipeline.h`, src/pipeline.jl, src/pipeline_exec.jl; untested here, no
Julia toolchain): [`Schedule`](@ref)s as data (seven generators, action lists, torch's CSV, files;
`Weft.validate`, `Weft.simulate` into a [`Timeline`](@ref), `Weft.tune`) and the
[`Pipeline`](@ref) executor, which calls Julia functions as stage callbacks (`run!`).

Expert parallelism (`weft/moe.h`, src/moe.jl; untested here, no Julia toolchain): the router
([`route`](@ref), [`router_backward`](@ref), [`update_bias!`](@ref)), [`moe_layout`](@ref), and
[`Moe`](@ref)'s [`dispatch`](@ref) / [`combine!`](@ref) / [`combine_backward!`](@ref) through a
reusable [`MoeHandle`](@ref).

The planner (`weft/plan.h`, src/plan.jl; untested here, no Julia toolchain): [`plan_layouts`](@ref)
ranks the parallel layouts of a model ([`PlanLayer`](@ref)s) on a [`PlanCluster`](@ref) by
predicted step time into a [`LayoutPlan`](@ref) (`Weft.layouts`, `Weft.best`, `Weft.scaling`,
`Weft.plan_text(p, :report)`); `LayoutPlan(model_path, cluster_path)` reads plan.h's text files.

Thread safety follows weft.h: a communicator and its requests are used by one thread at a time
(`Weft.abort` may be called from any thread). Communicators and requests have finalizers that
never call into the library: they queue the handle. A dropped request waits on its own
communicator's queue and is freed by that communicator's next call (on the thread using it)
once complete, or by `close(comm)`; other handles wait on a global queue drained by the next
Weft call. Call `close(comm)` explicitly when done.

The library is `ENV["WEFT_LIBRARY"]` when set (a path), else this checkout's
`build/lib/libweft.so` when it exists, else `libweft` from the system's search path; loading
checks that its ABI version is the one this package was written for ([`Weft.library_path`](@ref)).

`Weft.waitall(reqs)` is not exported (Julia 1.12's `Base.waitall` has the name).
"""
module Weft

using Libdl

export Comm, Config, Request, WeftError,
       allreduce!, bcast!, reduce!, allgather!, allgatherv!, reduce_scatter!, alltoall!, alltoallv!,
       gather!, scatter!, barrier, send, recv!, P2POp, p2p_batch!,
       Mesh, Placement, Shard, Replicate, Partial, ShardedTensor, redistribute!, localpart,
       Bucketer, Zero, OptimizerConfig, region_apply!, ring_shift!,
       Schedule, Action, Timeline, Costs, Pipeline, Boundary, StageCall, run!,
       RouterConfig, route, router_backward, update_bias!, moe_layout, Moe, MoeHandle, dispatch, received,
       combine!, combine_backward!,
       load_plugin, Plugin, PluginEntry, Closure, CustomOp, UserOp, register_op,
       PlanLayer, PlanCluster, PlanCollective, PlanLayout, LayoutPlan, plan_layouts

include("capi.jl")
include("capi_training.jl")   # weft/training.h: structs and raw wrappers
include("capi_pipeline.jl")   # weft/pipeline.h: structs and raw wrappers
include("capi_moe.jl")   # weft/moe.h: structs and raw wrappers
include("capi_plugin.jl")   # weft/plugin.h: structs and raw wrappers, CustomOp
include("capi_plan.jl")   # weft/plan.h: structs and raw wrappers

"Element types the collectives accept."
const WeftType = Union{Float64,Float32,Float16,Int8,UInt8,Int32,UInt32,Int64,UInt64}

"`weft_status_t`."
@enum Status::Cint begin
    OK = 0
    ERR_INVALID_ARGUMENT = 1
    ERR_UNSUPPORTED = 2
    ERR_OUT_OF_MEMORY = 3
    ERR_TIMEOUT = 4
    ERR_REMOTE = 5
    ERR_ABORTED = 6
    ERR_MISMATCH = 7
    ERR_TRANSPORT = 8
    ERR_INTERNAL = 9
    IN_PROGRESS = 10
end

"`weft_op_t`: reduction operators (see weft.h for the rules)."
@enum Op::Cint begin
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
end

"What collectives take as `op`: a built-in `Op` or a [`CustomOp`](@ref) (a plugin's or `register_op`'s)."
const OpLike = Union{Op,CustomOp}

"`weft_dtype_t`."
@enum Dtype::Cint begin
    FLOAT64 = 0
    FLOAT32 = 1
    FLOAT16 = 2
    BFLOAT16 = 3
    FP8_E4M3 = 4
    FP8_E5M2 = 5
    INT8 = 6
    UINT8 = 7
    INT32 = 8
    UINT32 = 9
    INT64 = 10
    UINT64 = 11
end

"    Weft.dtype(T) -> Dtype: the weft dtype of element type `T`."
dtype(::Type{Float64}) = FLOAT64
dtype(::Type{Float32}) = FLOAT32
dtype(::Type{Float16}) = FLOAT16
dtype(::Type{Int8}) = INT8
dtype(::Type{UInt8}) = UINT8
dtype(::Type{Int32}) = INT32
dtype(::Type{UInt32}) = UINT32
dtype(::Type{Int64}) = INT64
dtype(::Type{UInt64}) = UINT64

_dt(::Type{T}) where {T<:WeftType} = Cint(dtype(T))

# ------------------------------------------------------------------ errors

"""
    WeftError(status, message)

A failed weft call: `status` is a [`Weft.Status`](@ref) (or the raw code if this binding does not
know it) and `message` the library's detailed text (`weft_last_error`: which function, argument,
rank or peer).
"""
struct WeftError <: Exception
    status::Union{Status,Cint}
    message::String
end

_status(code::Integer) = 0 <= code <= 10 ? Status(Cint(code)) : Cint(code)

"    Weft.status_string(status) -> String  (`weft_status_string`)"
status_string(s::Union{Status,Integer}) = unsafe_string(weft_status_string(Cint(s)))

"    Weft.last_error() -> String: `weft_last_error` of this thread."
last_error() = unsafe_string(weft_last_error())

function Base.showerror(io::IO, e::WeftError)
    print(io, "WeftError: ", isempty(e.message) ? "" : e.message * " ", "(", status_string(e.status), ")")
end

# Throws for a failed status, reading weft_last_error on the same thread (no yield point lies
# between the ccall and this read).
@inline function _check(st::Cint)
    st == Cint(0) && return nothing
    throw(WeftError(_status(st), unsafe_string(weft_last_error())))
end

_invalid(msg::AbstractString) = throw(WeftError(ERR_INVALID_ARGUMENT, "Weft: " * msg))

"    Weft.version() -> (VersionNumber, abi::Int) of the loaded library (`weft_version`)."
function version()
    code, abi = Ref{Cint}(0), Ref{Cint}(0)
    _check(weft_version(code, abi))
    c = Int(code[])
    return VersionNumber(c ÷ 10000, (c ÷ 100) % 100, c % 100), Int(abi[])
end

"    Weft.dtype_size(d::Dtype) -> Int (`weft_dtype_size`)."
function dtype_size(d::Dtype)
    n = Ref{Csize_t}(0)
    _check(weft_dtype_size(Cint(d), n))
    return Int(n[])
end

# ------------------------------------------------------------------ deferred destruction
#
# Finalizers run at arbitrary allocation points, maybe on another thread, maybe while this
# thread is inside weft; they must neither call the library nor switch tasks. So they only
# push the handle (and, for a request, the arrays it still uses, which stay rooted here) onto
# _pending under a SpinLock taken with trylock; when the lock is busy they re-register
# themselves and run at a later collection. The queue is drained by the next API call.
# Requests are the exception: they queue on their own communicator (request.jl).

const _pending = Any[]
const _pending_lock = Threads.SpinLock()
const _npending = Threads.Atomic{Int}(0)

function _enqueue(item, obj, fin)
    trylock(_pending_lock) || (finalizer(fin, obj); return false)
    try
        push!(_pending, item)
        Threads.atomic_add!(_npending, 1)
    finally
        unlock(_pending_lock)
    end
    return true
end

function _drain()
    _npending[] == 0 && return nothing
    lock(_pending_lock)
    items = try
        its = copy(_pending)
        empty!(_pending)
        # A communicator's item counts its queued requests too (comm.jl: _finalize_comm).
        Threads.atomic_sub!(_npending, sum(it -> it[1] === :comm ? 1 + length(it[3]) : 1, its; init=0))
        its
    finally
        unlock(_pending_lock)
    end
    # An unreachable communicator's dropped requests: those complete are freed; while any is
    # still pending, the communicator and those requests go back to the queue for a later call
    # (the free would block this thread, which may be busy with another communicator, until the
    # operation ends or its deadline fails it). No thread uses an unreachable communicator, so
    # testing its requests here races with nobody; each item is taken by one thread only.
    kept = Set{Ptr{Cvoid}}()
    for (kind, h, x) in items
        kind === :request && weft_request_free(h)   # waits for it; its arrays are rooted in items
        if kind === :comm
            still = Any[]
            done = Ref{Cint}(0)
            for item in x
                st = weft_test(item[1], done)   # a failed operation's error is dropped with it
                st == Cint(IN_PROGRESS) ? push!(still, item) : weft_request_free(item[1])
            end
            if !isempty(still)
                push!(kept, h)
                lock(_pending_lock)
                try
                    push!(_pending, (:comm, h, still))
                    Threads.atomic_add!(_npending, 1 + length(still))
                finally
                    unlock(_pending_lock)
                end
            end
        end
    end
    _drain_moe(items)   # MoE handles, then Moes (moe.jl)
    _drain_plan(items)   # plans (plan.jl)
    _drain_pipeline(items)   # pipelines, schedules, timelines (pipeline.jl)
    _drain_training(items)   # bucketers and ZeRO handles, before their communicators and meshes (training.jl)
    _drain_mesh_family(items)   # sharded tensors, checkpoints, then meshes (mesh.jl)
    for (kind, h, _) in items
        kind === :comm && !(h in kept) && weft_comm_destroy(h)
    end
    return nothing
end

"Number of handles waiting in the finalizer queue (for tests)."
pending_count() = _npending[]

include("comm.jl")   # configuration, ids, communicators
include("request.jl")   # requests (wait, test, waitall)
include("collectives.jl")   # collectives and the helpers the operations share
include("p2p.jl")   # send, recv!, P2POp batches
include("mesh.jl")   # meshes, sharded tensors, redistribution, checkpoints (weft/mesh.h)
include("training.jl")   # gradient bucketer, ZeRO, regions, ring shift (weft/training.h)
include("pipeline.jl")   # schedules, timelines, simulation, tuning (weft/pipeline.h)
include("pipeline_exec.jl")   # the pipeline executor with Julia callbacks (weft/pipeline.h)
include("moe.jl")   # router, layout, dispatch and combine (weft/moe.h)
include("plugin.jl")   # plugins, calls by name, closures, Julia reduction operators (weft/plugin.h)
include("plan.jl")   # the planner: layouts ranked by predicted step time, Amdahl/Gustafson (weft/plan.h)

end # module
