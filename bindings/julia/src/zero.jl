# ZeRO stages 0-3 with a fused optimizer (weft/training.h): Zero and OptimizerConfig. Included
# from training.jl (its helpers and conventions: parameters and groups numbered from 1, arrays
# handed over as flat buffers with the reversed shape).

"""
    OptimizerConfig(; kind=:adamw, lr=1e-3, momentum=0, beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=0.01)

`weft_optimizer_config_t` (the defaults are `WEFT_OPTIMIZER_CONFIG_INIT`): `kind` `:sgd` (momentum,
weight decay added to the gradient), `:adam` (L2 weight decay) or `:adamw` (decoupled weight
decay), with torch.optim's formulas in Float32.
"""
struct OptimizerConfig
    kind::Symbol
    lr::Float32
    momentum::Float32
    beta1::Float32
    beta2::Float32
    eps::Float32
    weight_decay::Float32
end

OptimizerConfig(; kind::Symbol=:adamw, lr=1e-3, momentum=0, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01) =
    OptimizerConfig(kind, Float32(lr), Float32(momentum), Float32(beta1), Float32(beta2), Float32(eps),
                    Float32(weight_decay))

function _optimizer_c(o::OptimizerConfig)
    k = o.kind === :sgd ? WEFT_OPTIMIZER_SGD : o.kind === :adam ? WEFT_OPTIMIZER_ADAM :
        o.kind === :adamw ? WEFT_OPTIMIZER_ADAMW : _invalid("optimizer kind :$(o.kind); expected :sgd, :adam or :adamw")
    return OptimizerConfigC(Csize_t(sizeof(OptimizerConfigC)), k, o.lr, o.momentum, o.beta1, o.beta2, o.eps,
                            o.weight_decay)
end

_param_dtype(d::Dtype) = d in (FLOAT32, FLOAT16, BFLOAT16) ? d : _invalid("param_dtype $d; expected FLOAT32, FLOAT16 or BFLOAT16")
_param_dtype(::Type{Float32}) = FLOAT32
_param_dtype(::Type{Float16}) = FLOAT16
_param_dtype(T::Type) = _invalid("param_dtype $T; expected Float32, Float16 or Weft.BFLOAT16")

"""
    Zero(mesh, dp_dim, params; stage=2, param_dtype=Float32, optimizer=OptimizerConfig(),
         groups=nothing, group_bytes=0, names=nothing, grad_op=Weft.AVG, wire=:native,
         max_grad_norm=0, loss_scale=1, dynamic_loss_scale=false, growth=2, backoff=0.5,
         growth_interval=2000)

`weft_zero_create`, collective over the members of `mesh`: ZeRO over mesh dim `dp_dim` (every
other dim keeps its own copy). `params` are the initial values (`DenseArray`s of `param_dtype` or
Float32, read during the call; dp coordinate 0's are broadcast to the others); weft allocates the
parameters, gradients, optimizer state and master weights. `stage` 0 (plain data parallel) to 3
(parameters sharded too); `param_dtype` Float32, Float16 or `Weft.BFLOAT16`; `groups` gives each
parameter's group (1-based, non-decreasing: one flat buffer, reduced, partitioned and gathered
together) instead of `group_bytes` (0 = 25 MiB); `grad_op` `Weft.AVG` or `Weft.SUM`;
`max_grad_norm` clips (0: no clipping); `loss_scale` is the factor the loss was multiplied by,
`dynamic_loss_scale=true` adjusts it as torch.amp.GradScaler does.

One step: (stage 3: `Weft.gather!` each group) read parameters with `Weft.param`,
(`Weft.release!`), hand each gradient in with `Weft.grad_ready!` as backward produces it, then
`Weft.step!`. `close(z)` frees the handle; a finalizer queues it otherwise.
"""
mutable struct Zero
    handle::Ptr{Cvoid}
    mesh::Mesh
    shapes::Vector{Tuple}
    dtype::Dtype
end

function _finalize_zero(z::Zero)
    h = z.handle
    h == C_NULL && return nothing
    _enqueue((:zero, h, nothing), z, _finalize_zero) && (z.handle = C_NULL)
    return nothing
end

function Zero(m::Mesh, dp_dim, params::AbstractVector; stage::Integer=2, param_dtype=Float32,
              optimizer::OptimizerConfig=OptimizerConfig(), groups=nothing, group_bytes::Integer=0, names=nothing,
              grad_op::Op=AVG, wire::Union{Symbol,Integer}=:native, max_grad_norm::Real=0, loss_scale::Real=1,
              dynamic_loss_scale::Bool=false, growth::Real=2, backoff::Real=0.5, growth_interval::Integer=2000,
              error_feedback::Bool=false)
    _drain()
    _check_open(m)
    pd = _param_dtype(param_dtype)
    arrs = Any[p for p in params]
    n = length(arrs)
    for (i, p) in enumerate(arrs)
        p isa DenseArray || _invalid("Zero: parameter $i is a $(typeof(p)), not a DenseArray")
    end
    grp = groups === nothing ? Cint[] : Cint[Cint(g - 1) for g in groups]
    groups === nothing || length(grp) == n || _invalid("groups has $(length(grp)) entries for $n parameters")
    (stage >= 0 && group_bytes >= 0 && growth_interval >= 0) ||
        _invalid("stage, group_bytes and growth_interval must be >= 0")
    strs = _names(names, n, "parameter")
    shapes = Vector{Int64}[_reversed_shape(p) for p in arrs]
    dts = Cint[_tensor_dt(eltype(p), pd == BFLOAT16) for p in arrs]
    dim = string(dp_dim)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve arrs shapes strs grp begin
        views = TensorC[_flat_view(arrs[i], dts[i], shapes[i]) for i in 1:n]
        namep = strs === nothing ? Ptr{UInt8}[] : Ptr{UInt8}[pointer(s) for s in strs]
        GC.@preserve views namep begin
            cfg = Ref(ZeroConfigC(Csize_t(sizeof(ZeroConfigC)), Cint(stage), Cint(pd), _optimizer_c(optimizer),
                                  isempty(grp) ? Ptr{Cint}(C_NULL) : pointer(grp), Csize_t(group_bytes),
                                  strs === nothing ? Ptr{Ptr{UInt8}}(C_NULL) : pointer(namep), Cint(grad_op),
                                  _wire(wire), Float32(max_grad_norm), Float32(loss_scale), Cint(dynamic_loss_scale),
                                  Float32(growth), Float32(backoff), Cint(growth_interval), Cint(error_feedback)))
            _check(weft_zero_create(m.handle, dim, isempty(views) ? Ptr{TensorC}(C_NULL) : pointer(views),
                                    Csize_t(n), cfg, out))
        end
    end
    z = Zero(out[], m, Tuple[size(p) for p in arrs], pd)
    finalizer(_finalize_zero, z)
    return z
end

_check_open(z::Zero) = z.handle == C_NULL ? _invalid("the ZeRO handle is closed") : nothing
Base.isopen(z::Zero) = z.handle != C_NULL
"    length(z::Zero): the number of parameters."
Base.length(z::Zero) = length(z.shapes)

function _param_index(z::Zero, p::Integer)
    1 <= p <= length(z.shapes) || _invalid("parameter $p: the handle has $(length(z.shapes)) (numbered from 1)")
    return Csize_t(p - 1)
end

"    Weft.num_groups(z) -> Int (`weft_zero_num_groups`)."
function num_groups(z::Zero)
    _check_open(z)
    n = Ref{Csize_t}(0)
    _check(weft_zero_num_groups(z.handle, n))
    return Int(n[])
end

"    Weft.group_of(z, p) -> Int: parameter `p`'s group, 1-based (`weft_zero_group_of`)."
function group_of(z::Zero, p::Integer)
    _check_open(z)
    g = Ref{Csize_t}(0)
    _check(weft_zero_group_of(z.handle, _param_index(z, p), g))
    return Int(g[]) + 1
end

"""
    Weft.param(z, p) -> Array

`weft_zero_param`: a copy of parameter `p`'s full value, an array of the size it was created
with (element type the parameter dtype; `UInt16` bits for bfloat16). Stage 3: only while its
group is gathered ([`Weft.gather!`](@ref)).
"""
function param(z::Zero, p::Integer)
    _check_open(z)
    ref = Ref(_empty_tensor())
    _check(weft_zero_param(z.handle, _param_index(z, p), ref))
    v = ref[]
    T = _jltype(v.dtype)
    shp = z.shapes[p]
    out = Array{T}(undef, shp...)
    isempty(out) || GC.@preserve out unsafe_copyto!(pointer(out), Ptr{T}(v.data + v.byte_offset), length(out))
    return out
end

"""
    Weft.gather!(z, group; async=false)

`weft_zero_gather`: stage 3 all-gathers `group`'s (1-based) parameters (at once when already
gathered); stages 0-2 do nothing. With `async=true` it returns a [`Request`](@ref) (prefetch the
next group while computing on this one); the parameters are readable once it completes.
"""
function gather!(z::Zero, g::Integer; async::Bool=false)
    _drain()
    _check_open(z)
    g >= 1 || _invalid("group $g: groups are numbered from 1")
    if async
        req = Ref{Ptr{Cvoid}}(C_NULL)
        _check(weft_zero_gather(z.handle, Csize_t(g - 1), req))
        r = Request(req[], z.mesh.comm, (z,))
        if req[] == C_NULL   # nothing to do: complete at once
            r.done = true
            r.buffers = ()
        end
        return r
    end
    _check(weft_zero_gather(z.handle, Csize_t(g - 1), C_NULL))
    return nothing
end

"    Weft.release!(z, group): `weft_zero_release`, stage 3 frees the group's gathered parameters."
function release!(z::Zero, g::Integer)
    _drain()
    _check_open(z)
    g >= 1 || _invalid("group $g: groups are numbered from 1")
    _check(weft_zero_release(z.handle, Csize_t(g - 1)))
    return z
end

"""
    Weft.grad_ready!(z, p, grad)

`weft_zero_grad_ready`: parameter `p`'s gradient for this step (an array of the parameter's size
and dtype), copied during the call. Completing a group starts its reduction. Twice in a step
throws a `WeftError` naming the parameter.
"""
function grad_ready!(z::Zero, p::Integer, g::DenseArray{T}) where {T}
    _drain()
    _check_open(z)
    ci = _param_index(z, p)
    size(g) == z.shapes[p] || _invalid("grad_ready!: parameter $p has size $(z.shapes[p]), the gradient $(size(g))")
    shape = _reversed_shape(g)
    dt = _tensor_dt(T, z.dtype == BFLOAT16)
    GC.@preserve g shape begin
        ref = Ref(_flat_view(g, dt, shape))
        _check(weft_zero_grad_ready(z.handle, ci, ref))
    end
    return z
end

"""
    Weft.step!(z) -> NamedTuple

`weft_zero_step`, collective over the mesh's members: waits for the reductions, unscales, agrees
on skipping, clips, runs the optimizer and (stages 0-2) all-gathers the new parameters. Returns
`(skipped, grad_norm, loss_scale, comm_elements, comm_bytes)`.
"""
function step!(z::Zero)
    _drain()
    _check_open(z)
    ref = Ref(ZeroStepInfoC(Csize_t(sizeof(ZeroStepInfoC)), Cint(0), 0.0f0, 0.0f0, UInt64(0), UInt64(0)))
    _check(weft_zero_step(z.handle, ref))
    i = ref[]
    return (skipped=i.skipped != 0, grad_norm=i.grad_norm, loss_scale=i.loss_scale,
            comm_elements=Int(i.comm_elements), comm_bytes=Int(i.comm_bytes))
end

"    Weft.memory(z) -> NamedTuple: `weft_zero_memory`, bytes held (params, grads, optimizer, buffers, buffers_peak)."
function memory(z::Zero)
    _check_open(z)
    ref = Ref(ZeroMemoryC(Csize_t(sizeof(ZeroMemoryC)), 0, 0, 0, 0, 0))
    _check(weft_zero_memory(z.handle, ref))
    v = ref[]
    return (params=Int(v.params), grads=Int(v.grads), optimizer=Int(v.optimizer), buffers=Int(v.buffers),
            buffers_peak=Int(v.buffers_peak))
end

"    Weft.save_state(z, dir): `weft_zero_save`, collective: the optimizer state as a weft checkpoint."
function save_state(z::Zero, dir::AbstractString)
    _drain()
    _check_open(z)
    _check(weft_zero_save(z.handle, dir))
    return dir
end

"""
    Weft.load_state!(z, dir)

`weft_zero_load`, collective: reads a state saved with the same parameter shapes and optimizer
(on any data-parallel size) and all-gathers the parameters.
"""
function load_state!(z::Zero, dir::AbstractString)
    _drain()
    _check_open(z)
    _check(weft_zero_load(z.handle, dir))
    return z
end

"    close(z::Zero): `weft_zero_destroy`. Idempotent."
function Base.close(z::Zero)
    _drain()
    h = z.handle
    h == C_NULL && return nothing
    z.handle = C_NULL
    _check(weft_zero_destroy(h))
    return nothing
end

Base.show(io::IO, z::Zero) =
    print(io, "Weft.Zero(", length(z.shapes), " parameters, ", z.dtype, isopen(z) ? "" : ", closed", ")")
