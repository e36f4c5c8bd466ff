# The pipeline executor (weft/pipeline.h, last part): a [`Pipeline`](@ref) runs a Schedule over a
# communicator, calling Julia functions for the compute actions and moving activations and
# gradients between ranks itself. Included from Weft.jl after pipeline.jl.
#
# UNTESTED: no Julia toolchain was available when this was written (test/pipeline_tests.jl
# mirrors the Rust and Go tests, which run against the same library).
#
# The callbacks reach C through one closure-free @cfunction (_stage_trampoline) whose user_data
# is pointer_from_objref of a Ref holding the Julia functions; the Pipeline keeps that Ref (and
# the finalizer queue keeps it until the handle is destroyed), and Julia's GC does not move
# objects, so the pointer stays valid. An exception thrown by a callback is caught there, its
# text handed to weft_pipeline_set_error, and `run!` throws a WeftError with that text and the
# action named. Callbacks run on the thread inside `run!`; they must not yield to other tasks
# that use weft, and must not call `run!`.

"""
    StageBuffer

A weft-owned buffer a stage callback is given: `dtype` (a `weft_dtype_t` code), `shape` in C's
row-major order, `device` (`Weft.WEFT_DEVICE_CPU` or `_CUDA`), `data` (its first element). Read
or write host memory through [`Weft.stage_array`](@ref).
"""
struct StageBuffer
    dtype::Cint
    shape::Vector{Int}
    device::Cint
    device_id::Int
    data::Ptr{Cvoid}
    strided::Bool
end

"""
    StageCall

What a callback is given: `kind` (ACTION_F, ACTION_B, ACTION_I, ACTION_W, ACTION_REDUCE_GRAD),
`stage`, `microbatch` (0-based; -1 for REDUCE_GRAD), `input` and `output` (a
[`StageBuffer`](@ref), or `nothing` where pipeline.h says the call has none: stage 0's forward
input, the last stage's forward output and backward input, stage 0's backward output, W and
REDUCE_GRAD). An F input stays valid until the backward of the same stage and micro-batch has
returned; every other buffer only during the call.
"""
struct StageCall
    kind::ActionKind
    stage::Int
    microbatch::Int
    input::Union{Nothing,StageBuffer}
    output::Union{Nothing,StageBuffer}
end

function _stage_buffer(p::Ptr{TensorC})
    p == C_NULL && return nothing
    t = unsafe_load(p)
    shape = t.shape == C_NULL ? Int[] : Int[unsafe_load(t.shape, k) for k in 1:Int(t.ndim)]
    return StageBuffer(t.dtype, shape, t.device_type, Int(t.device_id), t.data + t.byte_offset, t.strides != C_NULL)
end

"""
    Weft.stage_array(T, buf) -> Array{T} or nothing

A host buffer as a Julia array of element type `T` (no copy; dims are the C shape reversed, as
for every weft tensor in this binding); `nothing` for `nothing`. Throws for device memory, another
dtype or a strided buffer. Valid only as long as the buffer is (see [`StageCall`](@ref)).
"""
function stage_array(::Type{T}, b::Union{Nothing,StageBuffer}) where {T<:WeftType}
    b === nothing && return nothing
    b.device == WEFT_DEVICE_CUDA && _invalid("stage_array: the buffer is CUDA memory; use its data pointer")
    b.dtype == _dt(T) || _invalid("stage_array: the buffer holds dtype $(b.dtype), not $T")
    b.strided && _invalid("stage_array: the buffer is strided")
    return unsafe_wrap(Array, Ptr{T}(b.data), Tuple(reverse(b.shape)); own=false)
end

"""
    Boundary(T, dims...; device=:cpu, device_id=0)

A stage boundary: stage s's output = stage s+1's input (and the gradient sent back), of element
type `T` and Julia dims `dims` (handed to C as the reversed row-major shape); `device=:cuda` for
memory of the communicator's GPU.
"""
struct Boundary
    dtype::Cint
    shape::Vector{Int64}
    device::Cint
    device_id::Cint
end

function Boundary(::Type{T}, dims::Integer...; device::Symbol=:cpu, device_id::Integer=0) where {T<:WeftType}
    dev = device === :cpu ? WEFT_DEVICE_CPU : device === :cuda ? WEFT_DEVICE_CUDA :
          _invalid("device = :$device; expected :cpu or :cuda")
    return Boundary(_dt(T), Int64[reverse(dims)...], dev, Cint(device_id))
end

mutable struct _StageFns
    forward::Any
    backward::Any
    backward_input::Any
    backward_weight::Any
    reduce_grad::Any
end

function _stage_failed(msg::AbstractString)
    weft_pipeline_set_error(replace(String(msg), '\0' => ' '))
    return Cint(ERR_INVALID_ARGUMENT)
end

function _pick(fns::_StageFns, kind::ActionKind)
    kind == ACTION_F && return fns.forward
    kind == ACTION_B && return fns.backward
    kind == ACTION_I && return fns.backward_input
    kind == ACTION_W && return fns.backward_weight
    kind == ACTION_REDUCE_GRAD && return fns.reduce_grad
    return nothing
end

# The one C callback (weft_stage_fn): finds the Julia function for the call's kind and runs it;
# nothing thrown may cross into C.
function _stage_trampoline(call::Ptr{StageCallC}, user_data::Ptr{Cvoid})::Cint
    try
        fns = (unsafe_pointer_to_objref(user_data)::Base.RefValue{_StageFns})[]
        c = unsafe_load(call)
        0 <= c.kind <= 8 || return _stage_failed("Weft (Julia): a call of unknown kind $(c.kind)")
        kind = ActionKind(c.kind)
        f = _pick(fns, kind)
        f === nothing && return _stage_failed("Weft (Julia): no callback for a $(action_name(kind)) action")
        f(StageCall(kind, Int(c.stage), Int(c.microbatch), _stage_buffer(c.input), _stage_buffer(c.output)))
        return Cint(0)
    catch e
        return _stage_failed(sprint(showerror, e))
    end
end

# The trampoline's C pointer, made at run time (a pointer made while precompiling would not
# survive loading the package).
const _STAGE_FN = Ref{Ptr{Cvoid}}(C_NULL)

function _stage_fn()
    if _STAGE_FN[] == C_NULL
        _STAGE_FN[] = @cfunction(_stage_trampoline, Cint, (Ptr{StageCallC}, Ptr{Cvoid}))
    end
    return _STAGE_FN[]
end

"""
    Pipeline(comm, schedule; forward, backward=nothing, backward_input=nothing,
             backward_weight=nothing, reduce_grad=nothing, boundaries=Boundary[], record=false,
             stream=C_NULL)

`weft_pipeline_create`, collective over `comm` (its size = the schedule's ranks; rank r runs
list r): an executor calling the given functions `f(call::StageCall)` for the compute actions.
`forward` is required; `backward` when the schedule has B actions; `backward_input` and
`backward_weight` when it has I and W; `reduce_grad` optional. `boundaries`: S - 1
[`Boundary`](@ref)s. `record`: every [`Weft.run!`](@ref) returns the step's timeline (set it on
all ranks or none). A callback that throws stops the run; `run!` then throws a WeftError with
the exception's text and the action named. `close(p)` frees it.
"""
mutable struct Pipeline
    handle::Ptr{Cvoid}
    comm::Comm
    schedule::Schedule
    fns::Base.RefValue{_StageFns}
    record::Bool
end

function _finalize_pipeline(p::Pipeline)
    h = p.handle
    h == C_NULL && return nothing
    _enqueue((:pipeline, h, p.fns), p, _finalize_pipeline) && (p.handle = C_NULL)
    return nothing
end

function Pipeline(c::Comm, s::Schedule; forward, backward=nothing, backward_input=nothing, backward_weight=nothing,
                  reduce_grad=nothing, boundaries=Boundary[], record::Bool=false, stream::Ptr{Cvoid}=C_NULL)
    _drain()
    _check_open(c)
    _check_open(s)
    forward === nothing && _invalid("Pipeline: the forward callback is required")
    fns = Ref(_StageFns(forward, backward, backward_input, backward_weight, reduce_grad))
    bs = Boundary[b for b in boundaries]
    fp = _stage_fn()
    given(f) = f === nothing ? C_NULL : fp
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve fns bs begin
        views = TensorC[TensorC(C_NULL, b.device, b.device_id, Cint(length(b.shape)), b.dtype,
                                isempty(b.shape) ? Ptr{Int64}(C_NULL) : pointer(b.shape), Ptr{Int64}(C_NULL), UInt64(0))
                        for b in bs]
        GC.@preserve views begin
            cfg = Ref(PipelineConfigC(Csize_t(sizeof(PipelineConfigC)), given(forward), given(backward),
                                      given(backward_input), given(backward_weight), given(reduce_grad),
                                      pointer_from_objref(fns), isempty(views) ? Ptr{TensorC}(C_NULL) : pointer(views),
                                      Csize_t(length(views)), stream, Cint(record)))
            _check(weft_pipeline_create(c.handle, s.handle, cfg, out))
        end
    end
    p = Pipeline(out[], c, s, fns, record)
    finalizer(_finalize_pipeline, p)
    return p
end

"""
    Weft.run!(p::Pipeline) -> Timeline or nothing

`weft_pipeline_run`: one step (this rank's actions in order; the callbacks run on this thread).
With `record=true`, the step's timeline for all ranks.
"""
function run!(p::Pipeline)
    _drain()
    p.handle == C_NULL && _invalid("the pipeline is closed")
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve p begin
        st = p.record ? weft_pipeline_run(p.handle, out) : weft_pipeline_run(p.handle, Ptr{Ptr{Cvoid}}(C_NULL))
        _check(st)
    end
    return out[] == C_NULL ? nothing : _timeline(out[])
end

function Base.close(p::Pipeline)
    h = p.handle
    h == C_NULL && return nothing
    p.handle = C_NULL
    GC.@preserve p _check(weft_pipeline_destroy(h))
    return nothing
end

Base.show(io::IO, p::Pipeline) = print(io, p.handle == C_NULL ? "Weft.Pipeline(closed)" : "Weft.Pipeline(record=$(p.record))")
