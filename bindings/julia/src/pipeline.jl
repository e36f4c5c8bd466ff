# Pipeline schedules, timelines, simulation and tuning (weft/pipeline.h), over the raw wrappers in
# capi_pipeline.jl. Included from Weft.jl after training.jl; the executor is in pipeline_exec.jl.
#
# UNTESTED: no Julia toolchain was available when this was written (test/pipeline_tests.jl
# mirrors the Rust and Go tests, which run against the same library).
#
# Conventions: ranks, stages and micro-batches are 0-based, as in pipeline.h and torch's action
# strings ("0F0", "1SEND_F0"); a REDUCE_GRAD action has micro-batch -1. Collections this binding
# returns (candidates) are 1-based, as Julia's are. Schedules and timelines have finalizers that
# queue the handle (see "deferred destruction" in Weft.jl); `close` frees one at once.

"`weft_action_kind_t`: what an [`Action`](@ref) does (pipeline.h states each)."
@enum ActionKind::Cint begin
    ACTION_F = 0
    ACTION_B = 1
    ACTION_I = 2
    ACTION_W = 3
    ACTION_SEND_F = 4
    ACTION_RECV_F = 5
    ACTION_SEND_B = 6
    ACTION_RECV_B = 7
    ACTION_REDUCE_GRAD = 8
end

"`weft_schedule_kind_t`: the generators (pipeline.h states each one's rule)."
@enum ScheduleKind::Cint begin
    SCHEDULE_CUSTOM = -1
    GPIPE = 0
    ONE_F_ONE_B = 1
    INTERLEAVED_1F1B = 2
    ZB_H1 = 3
    ZB_H2 = 4
    ZB_V = 5
    DUALPIPE_V = 6
end

"Every generator, in C enum order."
const SCHEDULE_GENERATORS = (GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZB_H1, ZB_H2, ZB_V, DUALPIPE_V)

const _ACTION_NAMES = ("F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD")

"    Weft.action_name(k::ActionKind) -> String: torch's name of the kind (\"F\", \"SEND_F\")."
action_name(k::ActionKind) = _ACTION_NAMES[Int(k)+1]

"    Weft.is_compute(k::ActionKind): F, B, I, W or REDUCE_GRAD (not a transfer)."
is_compute(k::ActionKind) = k in (ACTION_F, ACTION_B, ACTION_I, ACTION_W, ACTION_REDUCE_GRAD)

"""
    Action(kind, stage, microbatch=-1)

One action `{kind, stage, microbatch}` (0-based; -1 for REDUCE_GRAD). Printed as torch writes it:
"0F0", "1SEND_F0", "2REDUCE_GRAD".
"""
struct Action
    kind::ActionKind
    stage::Int
    microbatch::Int
end
Action(kind::ActionKind, stage::Integer) = Action(kind, Int(stage), -1)

Base.print(io::IO, a::Action) = a.microbatch < 0 ? print(io, a.stage, action_name(a.kind)) :
                                print(io, a.stage, action_name(a.kind), a.microbatch)
Base.show(io::IO, a::Action) = (print(io, "Action("); print(io, a); print(io, ")"))

_action_c(a::Action) = ActionC(Cint(a.kind), Int32(a.stage), Int32(a.microbatch))
function _action_jl(c::ActionC)
    0 <= c.kind <= 8 || _invalid("the library returned action kind $(c.kind), which this binding does not know")
    return Action(ActionKind(c.kind), Int(c.stage), Int(c.microbatch))
end

"""
    Schedule(kind::ScheduleKind; ranks, microbatches, stages_per_rank=0, reduce_grad=false)
    Schedule(entry::PluginEntry; ...)      # a SCHEDULE plugin's kind (or its id >= 64)
    Schedule(lists::AbstractVector)        # one Vector{Action} per rank

A pipeline schedule (`weft_schedule_t`): plain data, per rank an ordered list of actions.
The first form is `weft_schedule_generate` (`stages_per_rank` 0 = the method's own; a violated
rule of the method throws ERR_INVALID_ARGUMENT naming it); the second `weft_schedule_create`
(lists without any SEND/RECV get them inserted; everything but kinds and signs is left to
[`Weft.validate`](@ref)). See also [`Weft.schedule_from_csv`](@ref), [`Weft.load_schedule`](@ref).
Immutable: any number of threads may read it.
"""
mutable struct Schedule
    handle::Ptr{Cvoid}
end

function _finalize_schedule(s::Schedule)
    h = s.handle
    h == C_NULL && return nothing
    _enqueue((:schedule, h, nothing), s, _finalize_schedule) && (s.handle = C_NULL)
    return nothing
end

function _schedule(h::Ptr{Cvoid})
    s = Schedule(h)
    finalizer(_finalize_schedule, s)
    return s
end

_cint(x::Integer, what) = typemin(Cint) <= x <= typemax(Cint) ? Cint(x) : _invalid("$what = $x does not fit a C int")

# A SCHEDULE plugin's kind by its id (>= WEFT_PLUGIN_ID_BASE); plugin.jl adds the entry form.
Schedule(kind::Integer; kwargs...) = _generate(Cint(extension_id(kind)); kwargs...)
Schedule(kind::ScheduleKind; kwargs...) = _generate(Cint(kind); kwargs...)

function _generate(kind::Cint; ranks::Integer, microbatches::Integer, stages_per_rank::Integer=0,
                   reduce_grad::Bool=false)
    _drain()
    cfg = Ref(ScheduleConfigC(Csize_t(sizeof(ScheduleConfigC)), _cint(ranks, "ranks"), _cint(microbatches, "microbatches"),
                              _cint(stages_per_rank, "stages_per_rank"), Cint(reduce_grad)))
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _check(weft_schedule_generate(kind, cfg, out))
    return _schedule(out[])
end

function Schedule(lists::AbstractVector)
    _drain()
    cl = Vector{ActionC}[ActionC[_action_c(a) for a in l] for l in lists]
    counts = Csize_t[length(l) for l in cl]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve cl counts begin
        ptrs = Ptr{ActionC}[isempty(l) ? Ptr{ActionC}(C_NULL) : pointer(l) for l in cl]
        GC.@preserve ptrs begin
            _check(weft_schedule_create(_cint(length(cl), "number of rank lists"),
                                        isempty(ptrs) ? Ptr{Ptr{ActionC}}(C_NULL) : pointer(ptrs),
                                        isempty(counts) ? Ptr{Csize_t}(C_NULL) : pointer(counts), out))
        end
    end
    return _schedule(out[])
end

"    Weft.schedule_from_csv(text) -> Schedule: torch's CSV (either form; `weft_schedule_from_csv`)."
function schedule_from_csv(text::AbstractString)
    _drain()
    s = String(text)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve s _check(weft_schedule_from_csv(pointer(s), Csize_t(sizeof(s)), out))
    return _schedule(out[])
end

"    Weft.load_schedule(path) -> Schedule: a file written by [`Weft.save_schedule`](@ref)."
function load_schedule(path::AbstractString)
    _drain()
    occursin('\0', path) && _invalid("the path contains a NUL character")
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _check(weft_schedule_load(path, out))
    return _schedule(out[])
end

_check_open(s::Schedule) = s.handle == C_NULL ? _invalid("the schedule is closed") : nothing

function Base.close(s::Schedule)
    h = s.handle
    h == C_NULL && return nothing
    s.handle = C_NULL
    _check(weft_schedule_destroy(h))
    return nothing
end

"""
    Weft.info(s::Schedule) -> (kind, ranks, stages, microbatches, stages_per_rank)

`weft_schedule_info`: `kind` is a [`ScheduleKind`](@ref) (SCHEDULE_CUSTOM for a schedule not
generated) and `stages_per_rank` the most stages any rank holds.
"""
function info(s::Schedule)
    _check_open(s)
    i = Ref(ScheduleInfoC(Csize_t(sizeof(ScheduleInfoC)), WEFT_SCHEDULE_CUSTOM, Cint(0), Cint(0), Cint(0), Cint(0)))
    GC.@preserve s _check(weft_schedule_info(s.handle, i))
    v = i[]
    kind = -1 <= v.kind < WEFT_SCHEDULE_NUM_KINDS ? ScheduleKind(v.kind) : v.kind
    return (kind=kind, ranks=Int(v.ranks), stages=Int(v.stages), microbatches=Int(v.microbatches),
            stages_per_rank=Int(v.stages_per_rank))
end

"    Weft.actions(s::Schedule, rank) -> Vector{Action}: rank's list in order (a copy)."
function actions(s::Schedule, rank::Integer)
    _check_open(s)
    p, n = Ref{Ptr{ActionC}}(C_NULL), Ref{Csize_t}(0)
    GC.@preserve s begin
        _check(weft_schedule_actions(s.handle, _cint(rank, "rank"), p, n))
        return Action[_action_jl(unsafe_load(p[], k)) for k in 1:Int(n[])]
    end
end

"    Weft.stage_rank(s::Schedule, stage) -> Int or nothing (no rank runs its forward)."
function stage_rank(s::Schedule, stage::Integer)
    _check_open(s)
    r = Ref{Cint}(-1)
    GC.@preserve s _check(weft_schedule_stage_rank(s.handle, _cint(stage, "stage"), r))
    return r[] < 0 ? nothing : Int(r[])
end

"""
    Weft.validate(s::Schedule)

`weft_schedule_validate`: returns `nothing`, or throws ERR_INVALID_ARGUMENT naming the rank, the
action index, the action and the rule broken (placement, complete, order, transfers, no deadlock).
"""
function validate(s::Schedule)
    _check_open(s)
    GC.@preserve s _check(weft_schedule_validate(s.handle))
    return nothing
end

_csv_format(f::Symbol) = f === :compute_comms ? WEFT_CSV_COMPUTE_COMMS : f === :compute_only ? WEFT_CSV_COMPUTE_ONLY :
                         _invalid("format = :$f; expected :compute_comms or :compute_only")

"    Weft.to_csv(s::Schedule; format=:compute_comms) -> String: torch's CSV (rows end in \"\\r\\n\")."
function to_csv(s::Schedule; format::Symbol=:compute_comms)
    _check_open(s)
    f = _csv_format(format)
    n = Ref{Csize_t}(0)
    buf = UInt8[]
    GC.@preserve s begin
        _check(weft_schedule_to_csv(s.handle, f, Ptr{UInt8}(C_NULL), Csize_t(0), n))
        buf = Vector{UInt8}(undef, Int(n[]) + 1)
        GC.@preserve buf _check(weft_schedule_to_csv(s.handle, f, pointer(buf), Csize_t(length(buf)), n))
    end
    return String(buf[1:Int(n[])])
end

"    Weft.save_schedule(path, s::Schedule): `weft_schedule_save` (a FlatBuffers file)."
function save_schedule(path::AbstractString, s::Schedule)
    _check_open(s)
    occursin('\0', path) && _invalid("the path contains a NUL character")
    GC.@preserve s _check(weft_schedule_save(s.handle, path))
    return nothing
end

Base.show(io::IO, s::Schedule) = s.handle == C_NULL ? print(io, "Weft.Schedule(closed)") :
                                 (i = info(s); print(io, "Weft.Schedule($(i.kind), p=$(i.ranks), S=$(i.stages), m=$(i.microbatches))"))

# ------------------------------------------------------------------ timelines

"""
    Timeline

What happened, or would happen, on each rank (`weft_timeline_t`): from [`Weft.simulate`](@ref)
or a recorded [`Weft.run!`](@ref). [`Weft.makespan`](@ref), [`Weft.bubble_fraction`](@ref),
[`Weft.timeline_rank`](@ref), [`Weft.write_timeline`](@ref); `close` frees it.
"""
mutable struct Timeline
    handle::Ptr{Cvoid}
end

function _finalize_timeline(t::Timeline)
    h = t.handle
    h == C_NULL && return nothing
    _enqueue((:timeline, h, nothing), t, _finalize_timeline) && (t.handle = C_NULL)
    return nothing
end

function _timeline(h::Ptr{Cvoid})
    t = Timeline(h)
    finalizer(_finalize_timeline, t)
    return t
end

_check_open(t::Timeline) = t.handle == C_NULL ? _invalid("the timeline is closed") : nothing

function Base.close(t::Timeline)
    h = t.handle
    h == C_NULL && return nothing
    t.handle = C_NULL
    _check(weft_timeline_destroy(h))
    return nothing
end

function _timeline_info(t::Timeline)
    _check_open(t)
    i = Ref(TimelineInfoC(Csize_t(sizeof(TimelineInfoC)), Cint(0), 0.0, 0.0))
    GC.@preserve t _check(weft_timeline_info(t.handle, i))
    return i[]
end

"    Weft.nranks(t::Timeline) -> Int"
nranks(t::Timeline) = Int(_timeline_info(t).ranks)
"    Weft.makespan(t::Timeline) -> Float64: the latest end over all ranks."
makespan(t::Timeline) = Float64(_timeline_info(t).makespan)
"    Weft.bubble_fraction(t::Timeline) -> Float64: idle / (ranks * makespan)."
bubble_fraction(t::Timeline) = Float64(_timeline_info(t).bubble_fraction)

"""
    Weft.timeline_rank(t::Timeline, rank) -> (start, stop, busy, idle, peak_activations, peak_activation_bytes)

`weft_timeline_rank`: `start[k]`, `stop[k]` of action k+1 of the schedule's list for `rank`
(copies), and the rank's totals.
"""
function timeline_rank(t::Timeline, rank::Integer)
    _check_open(t)
    s, e, n = Ref{Ptr{Cdouble}}(C_NULL), Ref{Ptr{Cdouble}}(C_NULL), Ref{Csize_t}(0)
    st = Ref(RankStatsC(Csize_t(sizeof(RankStatsC)), 0.0, 0.0, Cint(0), 0.0))
    start, stop = Float64[], Float64[]
    GC.@preserve t begin
        _check(weft_timeline_rank(t.handle, _cint(rank, "rank"), s, e, n, st))
        k = Int(n[])
        start = Float64[unsafe_load(s[], j) for j in 1:k]
        stop = Float64[unsafe_load(e[], j) for j in 1:k]
    end
    v = st[]
    return (start=start, stop=stop, busy=Float64(v.busy), idle=Float64(v.idle),
            peak_activations=Int(v.peak_activations), peak_activation_bytes=Float64(v.peak_activation_bytes))
end

"    Weft.write_timeline(t::Timeline, path; format=:svg): an SVG picture or (:chrome_trace) a Chrome trace."
function write_timeline(t::Timeline, path::AbstractString; format::Symbol=:svg)
    _check_open(t)
    f = format === :svg ? WEFT_TIMELINE_SVG : format === :chrome_trace ? WEFT_TIMELINE_CHROME_TRACE :
        _invalid("format = :$format; expected :svg or :chrome_trace")
    occursin('\0', path) && _invalid("the path contains a NUL character")
    GC.@preserve t _check(weft_timeline_write(t.handle, f, path))
    return nothing
end

# ------------------------------------------------------------------ simulation

"""
    Costs(forward; backward=nothing, backward_input=nothing, backward_weight=nothing,
          activation_bytes=nothing, weight_grad_bytes=nothing, boundary_bytes=nothing,
          latency=0.0, bandwidth=0.0, overhead=0.0, reduce_grad=nothing, cost_model=0, microbatch_size=1)

Costs for the simulator (`weft_pipeline_costs_t`): one entry per stage in each vector (the number
of stages is `length(forward)`); `nothing` takes pipeline.h's default. `cost_model`: 0, or a
COST_MODEL plugin's entry (or its id) whose per-action times replace the vectors (`forward` still
gives the number of stages), called with `microbatch_size`.
"""
struct Costs
    forward::Vector{Float64}
    backward::Union{Nothing,Vector{Float64}}
    backward_input::Union{Nothing,Vector{Float64}}
    backward_weight::Union{Nothing,Vector{Float64}}
    activation_bytes::Union{Nothing,Vector{Float64}}
    weight_grad_bytes::Union{Nothing,Vector{Float64}}
    boundary_bytes::Union{Nothing,Vector{Float64}}
    latency::Float64
    bandwidth::Float64
    overhead::Float64
    reduce_grad::Union{Nothing,Vector{Float64}}
    cost_model::Int   # 0 = the arrays; a COST_MODEL plugin's id = its per-action times (weft/plugin.h)
    microbatch_size::Int   # passed to the cost model
end

_f64s(v) = v === nothing ? nothing : Float64[x for x in v]

Costs(forward; backward=nothing, backward_input=nothing, backward_weight=nothing, activation_bytes=nothing,
      weight_grad_bytes=nothing, boundary_bytes=nothing, latency=0.0, bandwidth=0.0, overhead=0.0, reduce_grad=nothing,
      cost_model=0, microbatch_size=1) =
    Costs(_f64s(forward), _f64s(backward), _f64s(backward_input), _f64s(backward_weight), _f64s(activation_bytes),
          _f64s(weight_grad_bytes), _f64s(boundary_bytes), Float64(latency), Float64(bandwidth), Float64(overhead),
          _f64s(reduce_grad), Int(extension_id(cost_model)), Int(microbatch_size))

"    Weft.uniform_costs(stages, f, b) -> Costs: every stage with forward time f, backward time b."
uniform_costs(stages::Integer, f::Real, b::Real) = Costs(fill(Float64(f), stages); backward=fill(Float64(b), stages))

function _cost_ptr(c::Costs, name::Symbol)
    v = getfield(c, name)
    v === nothing && return Ptr{Cdouble}(C_NULL)
    length(v) == length(c.forward) || _invalid("Costs.$name has $(length(v)) entries for $(length(c.forward)) stages")
    return isempty(v) ? Ptr{Cdouble}(C_NULL) : pointer(v)
end

"    Weft.simulate(s::Schedule, costs::Costs) -> Timeline (`weft_schedule_simulate`)."
function simulate(s::Schedule, c::Costs)
    _check_open(s)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve s c begin
        cc = Ref(PipelineCostsC(Csize_t(sizeof(PipelineCostsC)), _cint(length(c.forward), "stages"),
                                isempty(c.forward) ? Ptr{Cdouble}(C_NULL) : pointer(c.forward),
                                _cost_ptr(c, :backward), _cost_ptr(c, :backward_input), _cost_ptr(c, :backward_weight),
                                _cost_ptr(c, :activation_bytes), _cost_ptr(c, :weight_grad_bytes),
                                _cost_ptr(c, :boundary_bytes), c.latency, c.bandwidth, c.overhead,
                                _cost_ptr(c, :reduce_grad), _cint(c.cost_model, "cost_model"),
                                _cint(c.microbatch_size, "microbatch_size")))
        _check(weft_schedule_simulate(s.handle, cc, out))
    end
    return _timeline(out[])
end

# ------------------------------------------------------------------ tuning

"One tuning candidate (`weft_tune_candidate_t`)."
struct Candidate
    kind::Union{ScheduleKind,Cint}
    microbatches::Int
    stages_per_rank::Int
    microbatch_size::Int
    step_time::Float64
    bubble_fraction::Float64
    peak_bytes::Float64
    fits::Bool
end

"""
    Weft.tune(; ranks, layer_forward, layer_backward, global_batch, microbatch_overhead=0.0,
              activation_bytes_per_sample=0.0, boundary_bytes_per_sample=0.0, latency=0.0,
              bandwidth=0.0, memory_cap=0.0, static_bytes=0.0, kinds=nothing,
              max_stages_per_rank=0, max_microbatches=0, cost_model=0) -> (candidates, best)

`weft_schedule_tune`: every allowed (kind, m, v) simulated, sorted by step time (those that fit
first); `best` is the 1-based index of the fastest that fits, or `nothing`. pipeline.h states
the model.
"""
function tune(; ranks::Integer, layer_forward, layer_backward, global_batch::Integer, microbatch_overhead::Real=0.0,
              activation_bytes_per_sample::Real=0.0, boundary_bytes_per_sample::Real=0.0, latency::Real=0.0,
              bandwidth::Real=0.0, memory_cap::Real=0.0, static_bytes::Real=0.0, kinds=nothing,
              max_stages_per_rank::Integer=0, max_microbatches::Integer=0, cost_model=0)
    _drain()
    lf, lb = _f64s(layer_forward), _f64s(layer_backward)
    length(lb) == length(lf) || _invalid("tune: $(length(lb)) layer_backward entries for $(length(lf)) layers")
    ks = kinds === nothing ? Cint[] : Cint[Cint(k) for k in kinds]
    count, best = Ref{Csize_t}(0), Ref{Cint}(-1)
    raw = TuneCandidateC[]
    GC.@preserve lf lb ks begin
        cfg = Ref(TuneConfigC(Csize_t(sizeof(TuneConfigC)), _cint(ranks, "ranks"), _cint(length(lf), "layers"),
                              isempty(lf) ? Ptr{Cdouble}(C_NULL) : pointer(lf),
                              isempty(lb) ? Ptr{Cdouble}(C_NULL) : pointer(lb), _cint(global_batch, "global_batch"),
                              Float64(microbatch_overhead), Float64(activation_bytes_per_sample),
                              Float64(boundary_bytes_per_sample), Float64(latency), Float64(bandwidth),
                              Float64(memory_cap), Float64(static_bytes),
                              isempty(ks) ? Ptr{Cint}(C_NULL) : pointer(ks), Csize_t(length(ks)),
                              _cint(max_stages_per_rank, "max_stages_per_rank"),
                              _cint(max_microbatches, "max_microbatches"), Cint(extension_id(cost_model))))
        _check(weft_schedule_tune(cfg, Ptr{TuneCandidateC}(C_NULL), Csize_t(0), count, best))
        raw = Vector{TuneCandidateC}(undef, Int(count[]))
        if !isempty(raw)
            GC.@preserve raw _check(weft_schedule_tune(cfg, pointer(raw), Csize_t(length(raw)), count, best))
        end
    end
    cands = Candidate[Candidate(0 <= r.kind < WEFT_SCHEDULE_NUM_KINDS ? ScheduleKind(r.kind) : r.kind,
                                Int(r.microbatches), Int(r.stages_per_rank), Int(r.microbatch_size), Float64(r.step_time),
                                Float64(r.bubble_fraction), Float64(r.peak_bytes), r.fits != 0)
                      for r in raw[1:min(length(raw), Int(count[]))]]
    b = Int(best[])
    return cands, (0 <= b < length(cands) ? b + 1 : nothing)
end

# Called by _drain (Weft.jl) for the handles finalizers queued: pipelines before communicators
# (their own order is free: a pipeline holds its own reference to its schedule).
function _drain_pipeline(items)
    for (kind, h, _) in items
        kind === :pipeline && weft_pipeline_destroy(h)
    end
    for (kind, h, _) in items
        kind === :schedule && weft_schedule_destroy(h)
        kind === :timeline && weft_timeline_destroy(h)
    end
    return nothing
end
