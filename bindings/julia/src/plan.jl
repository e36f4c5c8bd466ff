# The planner (weft/plan.h): from a model (PlanLayers), a cluster (PlanCluster) and a global batch,
# the parallel layouts ranked by predicted step time, and what parallelism buys (Amdahl and
# Gustafson). Nothing communicates. Named LayoutPlan / plan_layouts because Weft.plan is the
# redistribution plan of sharded tensors.
#
# UNTESTED: no Julia toolchain was available when this was written.

"""
    PlanLayer(; name="", count=1, experts=0, top_k=1, tensor_parallel=true, params=0.0,
              forward_flops=0.0, forward_seconds=0.0, backward_seconds=0.0,
              activation_bytes=0.0, output_bytes=0.0, context_bytes=0.0, tp_replicated=0.0,
              tp_allreduces=0, shared_params=0.0)

One layer kind of the model (`weft_plan_layer_t`), `count` copies in a row. Per-sample
quantities are for one sample of the global batch; `experts > 0` makes an MoE layer (`params`
counts every expert); `forward_seconds > 0` overrides `forward_flops`; `backward_seconds` 0 is
twice the forward; `tensor_parallel=false` keeps the layer whole on every tp rank.
`tp_replicated`: of a layer split over tp (`tensor_parallel`, or an MoE layer), the share (0..1)
of its forward and backward time that every tp rank runs whole (norms, residual adds, a
projection outside the split); 0 = none. `tp_allreduces`: all-reduces over tp per micro-batch in
each direction of a splittable dense layer (0 = 2: a transformer block; 1: an MLP or attention
block alone). `shared_params`: of an MoE layer's `params`, those every rank holds whole (the
router, shared experts); its tokens are split over tp, so their gradients are all-reduced over tp
once a step, then reduced over dp as a dense layer's; the rest are the experts, sharded over ep.
"""
Base.@kwdef struct PlanLayer
    name::String = ""
    count::Int = 1
    experts::Int = 0
    top_k::Int = 1
    tensor_parallel::Bool = true
    params::Float64 = 0.0
    forward_flops::Float64 = 0.0
    forward_seconds::Float64 = 0.0
    backward_seconds::Float64 = 0.0
    activation_bytes::Float64 = 0.0
    output_bytes::Float64 = 0.0
    context_bytes::Float64 = 0.0
    tp_replicated::Float64 = 0.0
    tp_allreduces::Int = 0
    shared_params::Float64 = 0.0
end

"""
    PlanCollective(kind, ranks, seconds)

One measured small collective within one host (`weft_plan_collective_t`): one collective of
`kind` (`:allreduce` or `:alltoall`, or the C value `Weft.WEFT_PLAN_ALLREDUCE` /
`Weft.WEFT_PLAN_ALLTOALL`) over `ranks` ranks of one host (2 to `ranks_per_host`, each kind and
size at most once) took `seconds` while every rank of the host computed between calls
(weft-bench --cluster-file measures them). Within a host it replaces that kind's latency term
(plan.h's cost model: the entry of the group's size, else the per-step cost of the nearest
smaller size, else of the nearest larger). A `(kind, ranks, seconds)` tuple converts to one.
"""
struct PlanCollective
    kind::Union{Symbol,Integer}
    ranks::Int
    seconds::Float64
end

Base.convert(::Type{PlanCollective}, t::Tuple{Any,Any,Any}) = PlanCollective(t[1], t[2], t[3])

"""
    PlanCluster(; hosts=1, ranks_per_host=1, memory_per_rank=0.0, flops_per_rank=0.0,
                intra_bandwidth=0.0, intra_latency=0.0, inter_bandwidth=0.0, inter_latency=0.0,
                intra_collectives=PlanCollective[])

The machines (`weft_plan_cluster_t`): bandwidths in bytes/s per rank, latencies in seconds; the
`inter_` link is needed when `hosts > 1`. `intra_collectives` (optional, default none): measured
small collectives within a host, [`PlanCollective`](@ref)s or `(kind, ranks, seconds)` tuples,
e.g. `[(:allreduce, 2, 3e-6), (:alltoall, 4, 7e-6)]`; without them every collective's latency
term comes from `intra_latency`.
"""
Base.@kwdef struct PlanCluster
    hosts::Int = 1
    ranks_per_host::Int = 1
    memory_per_rank::Float64 = 0.0
    flops_per_rank::Float64 = 0.0
    intra_bandwidth::Float64 = 0.0
    intra_latency::Float64 = 0.0
    inter_bandwidth::Float64 = 0.0
    inter_latency::Float64 = 0.0
    intra_collectives::Vector{PlanCollective} = PlanCollective[]
end

"""
    PlanLayout(; dp=1, tp=1, pp=1, ep=1, cp=1, zero_stage=0, schedule=SCHEDULE_CUSTOM,
               microbatches=0, stages_per_rank=0, ...)

A layout and its prediction (`weft_plan_layout_t`). As the `layout` option of
[`plan_layouts`](@ref) only the first nine fields count (`SCHEDULE_CUSTOM` = try every
generator, 0 micro-batches = every count); a plan's layouts have every field set: `fits`,
`step_seconds`, `compute_seconds`, `communication_seconds`, `bubble_fraction`,
`memory_per_rank`, `static_bytes`, `activation_bytes`, `communication_bytes`.
"""
Base.@kwdef struct PlanLayout
    dp::Int = 1
    tp::Int = 1
    pp::Int = 1
    ep::Int = 1
    cp::Int = 1
    zero_stage::Int = 0
    schedule::Union{ScheduleKind,Cint} = SCHEDULE_CUSTOM
    microbatches::Int = 0
    stages_per_rank::Int = 0
    fits::Bool = false
    step_seconds::Float64 = 0.0
    compute_seconds::Float64 = 0.0
    communication_seconds::Float64 = 0.0
    bubble_fraction::Float64 = 0.0
    memory_per_rank::Float64 = 0.0
    static_bytes::Float64 = 0.0
    activation_bytes::Float64 = 0.0
    communication_bytes::Float64 = 0.0
end

_plan_kind(k::Cint) = -1 <= k < WEFT_SCHEDULE_NUM_KINDS ? ScheduleKind(k) : k

_julia_layout(c::PlanLayoutC) =
    PlanLayout(Int(c.dp), Int(c.tp), Int(c.pp), Int(c.ep), Int(c.cp), Int(c.zero_stage), _plan_kind(c.schedule),
               Int(c.microbatches), Int(c.stages_per_rank), c.fits != 0, c.step_seconds, c.compute_seconds,
               c.communication_seconds, c.bubble_fraction, c.memory_per_rank, c.static_bytes, c.activation_bytes,
               c.communication_bytes)

_c_layout(l::PlanLayout) =
    PlanLayoutC(Csize_t(sizeof(PlanLayoutC)), _cint(l.dp, "layout.dp"), _cint(l.tp, "layout.tp"),
                _cint(l.pp, "layout.pp"), _cint(l.ep, "layout.ep"), _cint(l.cp, "layout.cp"),
                _cint(l.zero_stage, "layout.zero_stage"), Cint(l.schedule), _cint(l.microbatches, "layout.microbatches"),
                _cint(l.stages_per_rank, "layout.stages_per_rank"), Cint(0), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

# The C value of a measured collective's kind: a name, or a C value passed on (the library
# refuses an unknown one, naming the entry).
function _plan_collective_kind(k, what::AbstractString)
    if k isa Symbol
        s = replace(replace(lowercase(String(k)), "_" => ""), "-" => "")
        s == "allreduce" && return WEFT_PLAN_ALLREDUCE
        s == "alltoall" && return WEFT_PLAN_ALLTOALL
        _invalid("$what = :$k; expected :allreduce or :alltoall")
    end
    return _cint(k, what)
end

_c_collectives(c::PlanCluster) =
    PlanCollectiveC[PlanCollectiveC(_plan_collective_kind(m.kind, "cluster.intra_collectives[$i].kind"),
                                    _cint(m.ranks, "cluster.intra_collectives[$i].ranks"), Float64(m.seconds))
                    for (i, m) in enumerate(c.intra_collectives)]

# `ms` (from _c_collectives, rooted by the caller for as long as the C struct is used).
_c_cluster(c::PlanCluster, ms::Vector{PlanCollectiveC}) =
    PlanClusterC(Csize_t(sizeof(PlanClusterC)), _cint(c.hosts, "cluster.hosts"),
                 _cint(c.ranks_per_host, "cluster.ranks_per_host"),
                 Float64(c.memory_per_rank), Float64(c.flops_per_rank), Float64(c.intra_bandwidth),
                 Float64(c.intra_latency), Float64(c.inter_bandwidth), Float64(c.inter_latency),
                 isempty(ms) ? Ptr{PlanCollectiveC}(C_NULL) : pointer(ms), Csize_t(length(ms)))

# Builds the C config and everything it points at, keeps them rooted, and calls f(Ref(config)).
function _with_plan_config(f, layers, cluster; global_batch::Integer=0, ranks::Integer=0, weight_bytes::Real=0.0,
                           grad_bytes::Real=0.0, optimizer_bytes::Real=0.0, microbatch_overhead::Real=0.0,
                           top::Integer=0, include_infeasible::Bool=false, max_pp::Integer=0, max_tp::Integer=0,
                           max_cp::Integer=0, tp_across_hosts::Bool=false, kinds=nothing, max_microbatches::Integer=0,
                           layout::Union{Nothing,PlanLayout}=nothing, scaling::Bool=false,
                           grad_allreduce_bytes::Real=0.0)
    names = String[String(l.name) for l in layers]
    for (i, n) in enumerate(names)
        occursin('\0', n) && _invalid("layers[$i]: the name contains a NUL character")
    end
    ms = cluster === nothing ? PlanCollectiveC[] : _c_collectives(cluster)
    ks = kinds === nothing ? Cint[] : Cint[Cint(k) for k in kinds]
    lay = layout === nothing ? PlanLayoutC[] : PlanLayoutC[_c_layout(layout)]
    GC.@preserve names ms ks lay begin
        cl = cluster === nothing ? PlanClusterC[] : PlanClusterC[_c_cluster(cluster, ms)]
        lc = PlanLayerC[PlanLayerC(isempty(names[i]) ? Ptr{UInt8}(C_NULL) : pointer(names[i]),
                                   _cint(l.count, "layers[$i].count"), _cint(l.experts, "layers[$i].experts"),
                                   _cint(l.top_k, "layers[$i].top_k"), Cint(l.tensor_parallel), Float64(l.params),
                                   Float64(l.forward_flops), Float64(l.forward_seconds), Float64(l.backward_seconds),
                                   Float64(l.activation_bytes), Float64(l.output_bytes), Float64(l.context_bytes),
                                   Float64(l.tp_replicated), _cint(l.tp_allreduces, "layers[$i].tp_allreduces"),
                                   Float64(l.shared_params))
                        for (i, l) in enumerate(layers)]
        GC.@preserve cl lc begin
            cfg = Ref(PlanConfigC(Csize_t(sizeof(PlanConfigC)), isempty(lc) ? Ptr{PlanLayerC}(C_NULL) : pointer(lc),
                                  Csize_t(length(lc)), isempty(cl) ? Ptr{PlanClusterC}(C_NULL) : pointer(cl),
                                  _cint(global_batch, "global_batch"), _cint(ranks, "ranks"), Float64(weight_bytes),
                                  Float64(grad_bytes), Float64(optimizer_bytes), Float64(microbatch_overhead),
                                  _cint(top, "top"), Cint(include_infeasible), _cint(max_pp, "max_pp"),
                                  _cint(max_tp, "max_tp"), _cint(max_cp, "max_cp"), Cint(tp_across_hosts),
                                  isempty(ks) ? Ptr{Cint}(C_NULL) : pointer(ks), Csize_t(length(ks)),
                                  _cint(max_microbatches, "max_microbatches"),
                                  isempty(lay) ? Ptr{PlanLayoutC}(C_NULL) : pointer(lay), Cint(scaling),
                                  Csize_t(sizeof(PlanLayerC)),   # layer_size: the stride of lc, 104 bytes
                                  Float64(grad_allreduce_bytes)))
            f(cfg)   # the value of the blocks, and so of the function (no return out of GC.@preserve)
        end
    end
end

"""
    LayoutPlan

A plan (`weft_plan_t`): the kept layouts, best first; immutable, so any number of threads may
read it. Made by [`plan_layouts`](@ref) or `LayoutPlan(model_path, cluster_path; ...)`;
`Weft.info`, `Weft.layout(p, i)` (1-based), `Weft.layouts`, `Weft.best`, `Weft.scaling`,
`Weft.plan_text`; `close(p)` frees it (a finalizer queues it otherwise).
"""
mutable struct LayoutPlan
    handle::Ptr{Cvoid}
end

function _finalize_plan(p::LayoutPlan)
    h = p.handle
    h == C_NULL && return nothing
    _enqueue((:plan, h, nothing), p, _finalize_plan) && (p.handle = C_NULL)
    return nothing
end

function _layout_plan(h::Ptr{Cvoid})
    p = LayoutPlan(h)
    finalizer(_finalize_plan, p)
    return p
end

"""
    plan_layouts(layers::AbstractVector{PlanLayer}, cluster::PlanCluster; global_batch, ranks=0,
                 weight_bytes=0, grad_bytes=0, optimizer_bytes=0, microbatch_overhead=0, top=0,
                 include_infeasible=false, max_pp=0, max_tp=0, max_cp=0, tp_across_hosts=false,
                 kinds=nothing, max_microbatches=0, layout=nothing, scaling=false,
                 grad_allreduce_bytes=0) -> LayoutPlan

`weft_plan_create`: the layouts of the model on the cluster ranked by predicted step time (those
that fit first), or `layout` alone predicted. Zero options take plan.h's defaults.
`grad_allreduce_bytes`: bytes per parameter of an all-reduce of the gradients over their replicas
before the DP reduction (a float64 sum for reproducibility: 8; 0 = none).
"""
function plan_layouts(layers::AbstractVector{PlanLayer}, cluster::PlanCluster; global_batch::Integer, kwargs...)
    _drain()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _with_plan_config(layers, cluster; global_batch=global_batch, kwargs...) do cfg
        _check(weft_plan_create(cfg, out))
    end
    return _layout_plan(out[])
end

"""
    LayoutPlan(model_path, cluster_path; global_batch=0, options...) -> LayoutPlan

`weft_plan_load`: the model and the cluster from plan.h's text files (errors name file:line and
the key); `global_batch` 0 = the model file's train line; nonzero options override the files.
"""
function LayoutPlan(model_path::AbstractString, cluster_path::AbstractString; kwargs...)
    _drain()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _with_plan_config(PlanLayer[], nothing; kwargs...) do cfg
        _check(weft_plan_load(model_path, cluster_path, cfg, out))
    end
    return _layout_plan(out[])
end

_check_open(p::LayoutPlan) = p.handle == C_NULL ? _invalid("the plan is closed") : nothing

function Base.close(p::LayoutPlan)
    h = p.handle
    h == C_NULL && return nothing
    p.handle = C_NULL
    _check(weft_plan_destroy(h))
    return nothing
end

"    Weft.info(p::LayoutPlan) -> (; ranks, global_batch, count, searched, feasible)  (`weft_plan_info`)"
function info(p::LayoutPlan)
    _check_open(p)
    i = Ref(PlanInfoC(Csize_t(sizeof(PlanInfoC)), Cint(0), Cint(0), Csize_t(0), Csize_t(0), Csize_t(0)))
    _check(weft_plan_info(p.handle, i))
    v = i[]
    return (ranks=Int(v.ranks), global_batch=Int(v.global_batch), count=Int(v.count), searched=Int(v.searched),
            feasible=Int(v.feasible))
end

Base.length(p::LayoutPlan) = info(p).count

"    Weft.layout(p::LayoutPlan, i) -> PlanLayout: the i-th kept layout (1-based), best first."
function layout(p::LayoutPlan, i::Integer)
    _check_open(p)
    i >= 1 || _invalid("layout index $i: expected 1..$(length(p))")
    c = Ref(_c_layout(PlanLayout()))
    _check(weft_plan_layout(p.handle, Csize_t(i - 1), c))
    return _julia_layout(c[])
end

"    Weft.layouts(p::LayoutPlan) -> Vector{PlanLayout}: every kept layout, best first."
layouts(p::LayoutPlan) = PlanLayout[layout(p, i) for i in 1:length(p)]

"    Weft.best(p::LayoutPlan) -> PlanLayout or nothing: the fastest that fits (or the one predicted)."
best(p::LayoutPlan) = length(p) == 0 ? nothing : layout(p, 1)

"""
    Weft.scaling(p::LayoutPlan) -> (summary, points)

`weft_plan_scaling`: `summary` = (; ranks, one_rank_seconds, step_seconds, speedup, efficiency,
serial_fraction, gustafson_speedup) at the plan's ranks; `points` = one named tuple per rank
count (ranks, weak_batch, fits, strong_seconds, strong_speedup, amdahl_speedup, weak_seconds,
weak_speedup, gustafson_speedup).
"""
function scaling(p::LayoutPlan)
    _check_open(p)
    s = Ref(PlanScalingC(Csize_t(sizeof(PlanScalingC)), Cint(0), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    n = Ref{Csize_t}(0)
    _check(weft_plan_scaling(p.handle, s, Ptr{PlanScalingPointC}(C_NULL), Csize_t(0), n))
    raw = Vector{PlanScalingPointC}(undef, Int(n[]))
    if !isempty(raw)
        GC.@preserve raw _check(weft_plan_scaling(p.handle, s, pointer(raw), Csize_t(length(raw)), n))
    end
    v = s[]
    summary = (ranks=Int(v.ranks), one_rank_seconds=v.one_rank_seconds, step_seconds=v.step_seconds,
               speedup=v.speedup, efficiency=v.efficiency, serial_fraction=v.serial_fraction,
               gustafson_speedup=v.gustafson_speedup)
    points = [(ranks=Int(q.ranks), weak_batch=Int(q.weak_batch), fits=q.fits != 0, strong_seconds=q.strong_seconds,
               strong_speedup=q.strong_speedup, amdahl_speedup=q.amdahl_speedup, weak_seconds=q.weak_seconds,
               weak_speedup=q.weak_speedup, gustafson_speedup=q.gustafson_speedup)
              for q in raw[1:min(length(raw), Int(n[]))]]
    return summary, points
end

"""
    Weft.plan_text(p::LayoutPlan, what=:table) -> String

`weft_plan_format`: `:table` (the kept layouts), `:report` (Amdahl/Gustafson with the strong and
weak curves) or `:json`.
"""
function plan_text(p::LayoutPlan, what::Symbol=:table)
    _check_open(p)
    k = what === :table ? WEFT_PLAN_FORMAT_TABLE : what === :report ? WEFT_PLAN_FORMAT_REPORT :
        what === :json ? WEFT_PLAN_FORMAT_JSON : _invalid("plan_text: $what; expected :table, :report or :json")
    n = Ref{Csize_t}(0)
    _check(weft_plan_format(p.handle, k, Ptr{UInt8}(C_NULL), Csize_t(0), n))
    buf = Vector{UInt8}(undef, Int(n[]) + 1)
    GC.@preserve buf _check(weft_plan_format(p.handle, k, pointer(buf), Csize_t(length(buf)), n))
    return String(buf[1:Int(n[])])
end

function Base.show(io::IO, p::LayoutPlan)
    if p.handle == C_NULL
        print(io, "Weft.LayoutPlan(closed)")
    else
        i = info(p)
        print(io, "Weft.LayoutPlan($(i.ranks) ranks, batch $(i.global_batch): $(i.count) kept of $(i.searched), ",
              "$(i.feasible) fit)")
    end
end

# Called by _drain (Weft.jl) for the plans finalizers queued.
function _drain_plan(items)
    for (kind, h, _) in items
        kind === :plan && weft_plan_destroy(h)
    end
    return nothing
end
