# Training parallelism (weft/training.h), over the raw wrappers in capi_training.jl: the gradient
# [`Bucketer`](@ref) (data parallelism), [`Zero`](@ref) (ZeRO stages 0-3 with a fused optimizer),
# Megatron's regions ([`region_apply!`](@ref)) and context parallelism's [`ring_shift!`](@ref).
# Included from Weft.jl, after mesh.jl.
#
# Conventions (see also the note at the top of mesh.jl):
#
# * Gradients, parameters, buckets and groups are numbered from 1, as Julia collections are; the
#   binding converts. Element offsets (`bucket_of`, `shard`) stay 0-based counts of elements.
#
# * The bucketer and ZeRO take contiguous arrays (`DenseArray`) and treat them as flat buffers:
#   a Julia array of size (n1, ..., nk) is handed to C as the row-major tensor of shape
#   (nk, ..., n1) - the same memory, so nothing is copied or transposed. Shapes only need to
#   agree between ranks; a state saved by `Weft.save_state` from Julia holds each parameter with
#   that reversed shape (a Julia `W` of size (out, in) is a row-major language's (in, out) tensor).
#
# * region_apply! takes strided arrays in Julia's own dim order with explicit strides (as
#   ShardedTensor does): `split_dim` is a 1-based Julia dim. ring_shift! sends whole arrays.
#
# * Julia has no bfloat16 type: with `param_dtype=Weft.BFLOAT16`, parameters read back and
#   gradients handed in are `UInt16` bit patterns (initial values may be Float32).

# ------------------------------------------------------------------ shared helpers

const _WIRES = (:native, :bf16, :fp8_e4m3)

# A CODEC plugin's wire format: its extension id (>= WEFT_PLUGIN_ID_BASE).
function _wire(w::Integer)
    w >= WEFT_PLUGIN_ID_BASE || _invalid("wire = $w; expected a symbol or a codec plugin's id (>= $WEFT_PLUGIN_ID_BASE)")
    return Cint(w)
end

function _wire(w::Symbol)
    i = findfirst(==(w), _WIRES)
    i === nothing && _invalid("wire = :$w; expected :native, :bf16 or :fp8_e4m3")
    return Cint(i - 1)
end

_empty_tensor() = TensorC(C_NULL, Cint(0), Cint(0), Cint(0), Cint(0), Ptr{Int64}(C_NULL), Ptr{Int64}(C_NULL), UInt64(0))

# A contiguous array as C's row-major tensor of the reversed shape (strides NULL). Call inside
# GC.@preserve A shape.
_flat_view(A::DenseArray, dt::Cint, shape::Vector{Int64}) =
    TensorC(isempty(A) ? C_NULL : Ptr{Cvoid}(pointer(A)), WEFT_DEVICE_CPU, Cint(0), Cint(length(shape)), dt,
            isempty(shape) ? Ptr{Int64}(C_NULL) : pointer(shape), Ptr{Int64}(C_NULL), UInt64(0))

_reversed_shape(A::AbstractArray) = Int64[reverse(size(A))...]

# The Julia element type of a weft dtype this binding reads back (bfloat16 as its bits).
function _jltype(d::Integer)
    d == Cint(FLOAT64) && return Float64
    d == Cint(FLOAT32) && return Float32
    d == Cint(FLOAT16) && return Float16
    d == Cint(BFLOAT16) && return UInt16
    _invalid("dtype $d is not a floating-point dtype this binding reads")
end

# The dtype a tensor of element type T is declared with: UInt16 means bfloat16 where the handle
# holds bfloat16.
function _tensor_dt(::Type{T}, bf16::Bool) where {T}
    T === UInt16 && bf16 && return Cint(BFLOAT16)
    T <: WeftType || _invalid("element type $T is not one weft takes")
    return _dt(T)
end

function _names(names, n::Integer, what::AbstractString)
    names === nothing && return nothing
    strs = String[string(x) for x in names]
    length(strs) == n || _invalid("$(length(strs)) $what names for $n $(what)s")
    any(s -> occursin('\0', s), strs) && _invalid("a $what name contains a NUL character")
    return strs
end

_dimname(m::Mesh, d::Integer) = m.names[_mesh_dim(m, d)]
_dimname(::Mesh, d::Union{AbstractString,Symbol}) = string(d)

# Called by _drain (Weft.jl) for the handles finalizers queued, before meshes and communicators.
function _drain_training(items)
    for (kind, h, _) in items
        kind === :bucketer && weft_bucketer_destroy(h)
        kind === :zero && weft_zero_destroy(h)
    end
    return nothing
end

# ------------------------------------------------------------------ gradient bucketer

"""
    Bucketer(comm, grads; bucket_bytes=0, bucket_of=nothing, op=Weft.AVG, wire=:native,
             reduction=:allreduce, names=nothing)

`weft_bucketer_create`, collective over `comm`: registers the gradient arrays `grads`
(`DenseArray`s of Float64, Float32 or Float16, in the order backward produces them; every rank the
same sizes and element types). weft keeps their addresses: the Bucketer keeps the arrays alive,
and they must not be resized. `bucket_bytes` (0 = 25 MiB) closes a bucket before it grows past
that size; `bucket_of` gives each gradient's bucket (1-based) instead. `op` is `Weft.SUM` or
`Weft.AVG` (the mean over the ranks); `wire` `:native`, `:bf16` or `:fp8_e4m3` (Float32 only);
`reduction` `:allreduce` (results written into the gradients) or `:reduce_scatter` (each rank
gets a chunk of each bucket: [`Weft.shard`](@ref)); `names` appear in error messages.

One step: fill each gradient, `Weft.mark_ready!(b, i)` it as backward produces it (buckets start
reducing as they fill; do not write it again until `finish!`), then `Weft.finish!(b)`.
`close(b)` frees the handle; a finalizer queues it otherwise.
"""
mutable struct Bucketer
    handle::Ptr{Cvoid}
    comm::Comm
    grads::Vector{Any}
end

function _finalize_bucketer(b::Bucketer)
    h = b.handle
    h == C_NULL && return nothing
    _enqueue((:bucketer, h, b.grads), b, _finalize_bucketer) && (b.handle = C_NULL)
    return nothing
end

function Bucketer(c::Comm, grads::AbstractVector; bucket_bytes::Integer=0, bucket_of=nothing, op::Op=AVG,
                  wire::Union{Symbol,Integer}=:native, reduction::Symbol=:allreduce, names=nothing,
                  error_feedback::Bool=false)
    _drain()
    _check_open(c)
    arrs = Any[g for g in grads]
    n = length(arrs)
    for (i, g) in enumerate(arrs)
        g isa DenseArray || _invalid("Bucketer: gradient $i is a $(typeof(g)), not a DenseArray")
    end
    red = reduction === :allreduce ? WEFT_BUCKET_ALLREDUCE :
          reduction === :reduce_scatter ? WEFT_BUCKET_REDUCE_SCATTER :
          _invalid("reduction = :$reduction; expected :allreduce or :reduce_scatter")
    bo = bucket_of === nothing ? Csize_t[] : Csize_t[Csize_t(x - 1) for x in bucket_of]
    bucket_of === nothing || length(bo) == n || _invalid("bucket_of has $(length(bo)) entries for $n gradients")
    bucket_bytes >= 0 || _invalid("bucket_bytes = $bucket_bytes; expected >= 0")
    strs = _names(names, n, "gradient")
    shapes = Vector{Int64}[_reversed_shape(g) for g in arrs]
    dts = Cint[_tensor_dt(eltype(g), false) for g in arrs]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve arrs shapes strs bo begin
        views = TensorC[_flat_view(arrs[i], dts[i], shapes[i]) for i in 1:n]
        namep = strs === nothing ? Ptr{UInt8}[] : Ptr{UInt8}[pointer(s) for s in strs]
        GC.@preserve views namep begin
            cfg = Ref(BucketerConfigC(Csize_t(sizeof(BucketerConfigC)), Csize_t(bucket_bytes),
                                      isempty(bo) ? Ptr{Csize_t}(C_NULL) : pointer(bo), Cint(op), _wire(wire), red,
                                      strs === nothing ? Ptr{Ptr{UInt8}}(C_NULL) : pointer(namep),
                                      Cint(error_feedback)))
            _check(weft_bucketer_create(c.handle, isempty(views) ? Ptr{TensorC}(C_NULL) : pointer(views),
                                        Csize_t(n), cfg, out))
        end
    end
    b = Bucketer(out[], c, arrs)
    finalizer(_finalize_bucketer, b)
    return b
end

_check_open(b::Bucketer) = b.handle == C_NULL ? _invalid("the bucketer is closed") : nothing
Base.isopen(b::Bucketer) = b.handle != C_NULL
Base.length(b::Bucketer) = length(b.grads)

function _grad_index(b::Bucketer, i::Integer)
    1 <= i <= length(b.grads) || _invalid("gradient $i: the bucketer has $(length(b.grads)) (numbered from 1)")
    return Csize_t(i - 1)
end

"    Weft.num_buckets(b) -> Int (`weft_bucketer_num_buckets`)."
function num_buckets(b::Bucketer)
    _check_open(b)
    n = Ref{Csize_t}(0)
    _check(weft_bucketer_num_buckets(b.handle, n))
    return Int(n[])
end

"""
    Weft.bucket_of(b, i) -> (bucket, offset)

`weft_bucketer_bucket_of`: gradient `i`'s bucket (1-based) and the number of bucket elements
before it (0-based offset).
"""
function bucket_of(b::Bucketer, i::Integer)
    _check_open(b)
    bk, off = Ref{Csize_t}(0), Ref{Csize_t}(0)
    _check(weft_bucketer_bucket_of(b.handle, _grad_index(b, i), bk, off))
    return Int(bk[]) + 1, Int(off[])
end

"""
    Weft.mark_ready!(b, i)

`weft_bucketer_mark_ready`: gradient `i` holds its final value for this step. Buckets it
completes start reducing before the call returns. Marking a gradient twice in a step throws a
`WeftError` naming it.
"""
function mark_ready!(b::Bucketer, i::Integer)
    _drain()
    _check_open(b)
    ci = _grad_index(b, i)
    g = b.grads[i]
    GC.@preserve g _check(weft_bucketer_mark_ready(b.handle, ci, isempty(g) ? C_NULL : Ptr{Cvoid}(pointer(g)), C_NULL))
    return b
end

"""
    Weft.finish!(b)

`weft_bucketer_finish`: waits for every bucket's reduction and writes the results (`:allreduce`:
into the gradients; `:reduce_scatter`: into [`Weft.shard`](@ref)s), then resets for the next
step. A gradient never marked throws a `WeftError` naming it (the step stays open).
"""
function finish!(b::Bucketer)
    _drain()
    _check_open(b)
    grads = b.grads
    GC.@preserve grads _check(weft_bucketer_finish(b.handle, C_NULL))
    return b
end

"""
    Weft.shard(b, bucket) -> (offset, values::Vector)

`weft_bucketer_shard` (`:reduce_scatter`, after `finish!`): a copy of this rank's reduced chunk of
`bucket` (1-based) and the number of bucket elements before it. The bucket is its gradients'
elements concatenated in list order (each in Julia's memory order); chunks follow torch.chunk's
rule over the ranks.
"""
function shard(b::Bucketer, bucket::Integer)
    _check_open(b)
    bucket >= 1 || _invalid("bucket $bucket: buckets are numbered from 1")
    ref = Ref(_empty_tensor())
    off = Ref{Csize_t}(0)
    _check(weft_bucketer_shard(b.handle, Csize_t(bucket - 1), ref, off))
    v = ref[]
    T = _jltype(v.dtype)
    n = (v.ndim >= 1 && v.shape != C_NULL) ? Int(unsafe_load(v.shape)) : 0
    vals = Vector{T}(undef, n)
    n == 0 || GC.@preserve vals unsafe_copyto!(pointer(vals), Ptr{T}(v.data + v.byte_offset), n)
    return Int(off[]), vals
end

"""
    Weft.stats(b) -> NamedTuple

`weft_bucketer_stats`: `steps` (finish! calls so far), and for the last step `wire_bytes` (bytes
this rank's reductions moved; an all-reduce of n bytes counts 2n), `exposed_ns` (time finish!
waited) and `launched_late` (buckets ready before an earlier bucket).
"""
function stats(b::Bucketer)
    _check_open(b)
    ref = Ref(BucketerStatsC(Csize_t(sizeof(BucketerStatsC)), 0, 0, 0, 0))
    _check(weft_bucketer_stats(b.handle, ref))
    s = ref[]
    return (steps=Int(s.steps), wire_bytes=Int(s.wire_bytes), exposed_ns=Int(s.exposed_ns),
            launched_late=Int(s.launched_late))
end

"    close(b::Bucketer): `weft_bucketer_destroy` (the arrays stay the caller's). Idempotent."
function Base.close(b::Bucketer)
    _drain()
    h = b.handle
    h == C_NULL && return nothing
    b.handle = C_NULL
    _check(weft_bucketer_destroy(h))
    return nothing
end

Base.show(io::IO, b::Bucketer) =
    print(io, "Weft.Bucketer(", length(b.grads), " gradients", isopen(b) ? "" : ", closed", ")")

include("zero.jl")   # Zero, OptimizerConfig (the ZeRO handle)

# ------------------------------------------------------------------ regions, ring shift

const _REGIONS = (:copy, :reduce, :scatter, :gather, :seq_gather, :seq_reduce_scatter)

"""
    region_apply!(out, mesh, dim, region, input; backward=false, split_dim=1, async=false)

`weft_region_apply`: runs Megatron region `region`'s forward (or, with `backward=true`, its
backward) over this rank's group along mesh dim `dim` (a name or 1-based index), reading `input`
and writing `out` (strided arrays, Julia dim order):

| region | forward | backward |
| --- | --- | --- |
| `:copy` | identity | all-reduce (sum) |
| `:reduce` | all-reduce (sum) | identity |
| `:scatter` | keep this rank's chunk | all-gather |
| `:gather` | all-gather | keep this rank's chunk |
| `:seq_gather` | all-gather | reduce-scatter (sum) |
| `:seq_reduce_scatter` | reduce-scatter (sum) | all-gather |

Chunks are along the 1-based Julia dim `split_dim`, by torch.chunk's rule (`cld(n, size)`; the
last ones may be short or empty). The identity and all-reduce cases accept `out === input`.
Returns `out`, or with `async=true` a [`Request`](@ref) keeping both arrays alive.
"""
function region_apply!(out::StridedArray{T}, m::Mesh, dim, region::Symbol, input::StridedArray{T};
                       backward::Bool=false, split_dim::Integer=1, async::Bool=false) where {T<:WeftType}
    _drain()
    _check_open(m)
    r = findfirst(==(region), _REGIONS)
    r === nothing && _invalid("region :$region; expected one of $(_REGIONS)")
    split_dim >= 1 || _invalid("split_dim = $split_dim: tensor dims are 1-based")
    d = _dimname(m, dim)
    keep = (input, out)
    return _with_view(input) do vin
        _with_view(out) do vout
            if async
                req = Ref{Ptr{Cvoid}}(C_NULL)
                _check(weft_region_apply(m.handle, d, Cint(r - 1), Cint(backward), Cint(split_dim - 1), vin, vout,
                                         C_NULL, req))
                return Request(req[], m.comm, keep)
            end
            _check(weft_region_apply(m.handle, d, Cint(r - 1), Cint(backward), Cint(split_dim - 1), vin, vout,
                                     C_NULL, C_NULL))
            return out
        end
    end
end

"""
    ring_shift!(recv, mesh, dim, shift, send; async=false)

`weft_ring_shift`: one step of a ring over mesh dim `dim` (context parallelism's key/value
rotation): sends all of `send` to the rank `shift` places further along the dim (wrapping) and
receives `recv` from the rank `shift` places before, as one point-to-point batch; `recv` must
have as many elements as that rank sends. Returns `recv`, or with `async=true` a
[`Request`](@ref) (overlap the transfer with the current block's compute).
"""
function ring_shift!(recv::DenseArray{T}, m::Mesh, dim, shift::Integer, send::DenseArray{T};
                     async::Bool=false) where {T<:WeftType}
    _drain()
    _check_open(m)
    d = _dimname(m, dim)
    keep = (send, recv)
    sshape, rshape = Int64[length(send)], Int64[length(recv)]
    GC.@preserve send recv sshape rshape begin
        vs = Ref(_flat_view(send, _dt(T), sshape))
        vr = Ref(_flat_view(recv, _dt(T), rshape))
        if async
            req = Ref{Ptr{Cvoid}}(C_NULL)
            _check(weft_ring_shift(m.handle, d, Cint(shift), vs, vr, C_NULL, req))
            return Request(req[], m.comm, keep)
        end
        _check(weft_ring_shift(m.handle, d, Cint(shift), vs, vr, C_NULL, C_NULL))
    end
    return recv
end
