# Expert parallelism (weft/moe.h) over host memory, on the raw wrappers in capi_moe.jl: the
# router ([`route`](@ref), [`router_backward`](@ref), [`update_bias!`](@ref)), the dispatch
# layout ([`moe_layout`](@ref)), and [`Moe`](@ref), whose [`dispatch`](@ref) sends each token to
# the ranks of its experts and returns a [`MoeHandle`](@ref) that [`combine!`](@ref) and
# [`combine_backward!`](@ref) reuse. Included from Weft.jl, after training.jl.
#
# UNTESTED: no Julia toolchain was available when this was written.
#
# Conventions:
# * Arrays are column-major views of moe.h's row-major ones, as in training.jl: C's logits
#   [T, E] are a Julia (E, T) matrix (a column per token), x [T, H] is (H, T), indices and
#   weights [T, k] are (k, T), token_in_rank [T, nranks] is (nranks, T).
# * Expert numbers, ranks and token indices stay 0-based as moe.h gives them (an expert index
#   is data, compared with WEFT_MOE_DROPPED = -1).
# * Julia has no bfloat16 type: bfloat16 logits or tokens are UInt16 bit patterns (dtype
#   Weft.BFLOAT16 in the Moe, or `bf16=true` for the router).

const _SCORES = (:softmax, :topk_softmax, :sigmoid)
const _DROPS = (:none, :by_probability, :by_position)

function _choice(v::Symbol, options, what)
    i = findfirst(==(v), options)
    i === nothing && _invalid("$what = :$v; expected one of $(join(":" .* string.(options), ", "))")
    return Cint(i - 1)
end

"""
    RouterConfig(; experts, topk=1, score=:softmax, normalize=false, groups=0, topk_groups=0,
                 bias=nothing, drop=:none, capacity_factor=1.0, aux_loss_coeff=0, z_loss_coeff=0, selector=0)

Router options (`weft_router_config_t`; moe.h gives the rules). `score` is `:softmax`,
`:topk_softmax` or `:sigmoid`; `drop` is `:none`, `:by_probability` or `:by_position`; `bias`
is `nothing` or `experts` Float32 values added to the scores for selection only. `selector` is 0
(the built-in top-k) or a ROUTER plugin's id (`Weft.extension_id(entry)` of a loaded plugin's
entry, weft/plugin.h).
"""
Base.@kwdef struct RouterConfig
    experts::Int
    topk::Int = 1
    score::Symbol = :softmax
    normalize::Bool = false
    groups::Int = 0
    topk_groups::Int = 0
    bias::Union{Nothing,Vector{Float32}} = nothing
    drop::Symbol = :none
    capacity_factor::Float64 = 1.0
    aux_loss_coeff::Float32 = 0.0f0
    z_loss_coeff::Float32 = 0.0f0
    selector::Int = 0
end

# The C struct; call inside GC.@preserve cfg.bias (the struct points into it).
function _router_c(cfg::RouterConfig)
    cfg.bias === nothing || length(cfg.bias) == cfg.experts ||
        _invalid("RouterConfig.bias has $(length(cfg.bias)) values, expected experts = $(cfg.experts)")
    return RouterConfigC(Csize_t(sizeof(RouterConfigC)), Cint(cfg.experts), Cint(cfg.topk),
                         _choice(cfg.score, _SCORES, "score"), Cint(cfg.normalize), Cint(cfg.groups),
                         Cint(cfg.topk_groups), cfg.bias === nothing ? Ptr{Float32}(C_NULL) : pointer(cfg.bias),
                         _choice(cfg.drop, _DROPS, "drop"), Cdouble(cfg.capacity_factor),
                         Cfloat(cfg.aux_loss_coeff), Cfloat(cfg.z_loss_coeff), Cint(cfg.selector))
end

# A host tensor of C shape (rows, cols) over the contiguous array A; call inside
# GC.@preserve A shape.
function _moe_tensor(A::DenseArray, dt::Cint, shape::Vector{Int64})
    TensorC(isempty(A) ? C_NULL : Ptr{Cvoid}(pointer(A)), WEFT_DEVICE_CPU, Cint(0), Cint(2), dt,
            pointer(shape), Ptr{Int64}(C_NULL), UInt64(0))
end

_router_dt(::Type{Float32}, bf16::Bool) = Cint(FLOAT32)
_router_dt(::Type{UInt16}, bf16::Bool) = bf16 ? Cint(BFLOAT16) : _invalid("UInt16 logits are bfloat16 bits: pass bf16=true")

function _tokens_of(logits::AbstractMatrix, cfg::RouterConfig)
    size(logits, 1) == cfg.experts || _invalid("logits have $(size(logits, 1)) rows, expected experts = $(cfg.experts) (a column per token)")
    return size(logits, 2)
end

"""
    route(logits, cfg::RouterConfig; bf16=false) -> NamedTuple

`weft_router_forward` on host logits, an (E, T) matrix (Float32, or UInt16 bfloat16 bits with
`bf16=true`). Returns `(indices, weights, tokens_per_expert, selected_per_expert, aux_loss,
z_loss)`: indices (k, T) Int32 0-based experts or WEFT_MOE_DROPPED, weights (k, T) Float32,
per-expert counts after and before dropping.
"""
function route(logits::Matrix{T}, cfg::RouterConfig; bf16::Bool=false) where {T<:Union{Float32,UInt16}}
    _drain()
    tokens = _tokens_of(logits, cfg)
    dt = _router_dt(T, bf16)
    indices = zeros(Int32, cfg.topk, tokens)
    weights = zeros(Float32, cfg.topk, tokens)
    kept, selected = zeros(Int64, cfg.experts), zeros(Int64, cfg.experts)
    shape = Int64[tokens, cfg.experts]
    bias = cfg.bias   # rooted by the preserve below: the C config points into it
    res = GC.@preserve logits bias shape indices weights kept selected begin
        c = Ref(_router_c(cfg))
        t = Ref(_moe_tensor(logits, dt, shape))
        r = Ref(RouterResultC(Csize_t(sizeof(RouterResultC)), pointer(indices), pointer(weights), pointer(kept),
                              pointer(selected), 0.0f0, 0.0f0))
        _check(weft_router_forward(t, c, r, C_NULL))
        r[]
    end
    return (indices=indices, weights=weights, tokens_per_expert=kept, selected_per_expert=selected,
            aux_loss=res.aux_loss, z_loss=res.z_loss)
end

"""
    router_backward(logits, cfg, indices, grad_weights; grad_aux=0, grad_z=0, bf16=false) -> Matrix{Float32}

`weft_router_backward`: the (E, T) gradient of sum(grad_weights .* weights) + grad_aux * aux_loss
+ grad_z * z_loss with respect to the logits, `indices` (as [`route`](@ref) returned them) fixed.
"""
function router_backward(logits::Matrix{T}, cfg::RouterConfig, indices::Matrix{Int32}, grad_weights::Matrix{Float32};
                         grad_aux::Real=0, grad_z::Real=0, bf16::Bool=false) where {T<:Union{Float32,UInt16}}
    _drain()
    tokens = _tokens_of(logits, cfg)
    dt = _router_dt(T, bf16)
    size(indices) == (cfg.topk, tokens) || _invalid("indices have size $(size(indices)), expected (topk, T) = $((cfg.topk, tokens))")
    size(grad_weights) == (cfg.topk, tokens) || _invalid("grad_weights have size $(size(grad_weights)), expected $((cfg.topk, tokens))")
    grad = zeros(Float32, cfg.experts, tokens)
    shape = Int64[tokens, cfg.experts]
    bias = cfg.bias
    GC.@preserve logits bias shape indices grad_weights grad begin
        c = Ref(_router_c(cfg))
        t, g = Ref(_moe_tensor(logits, dt, shape)), Ref(_moe_tensor(grad, Cint(FLOAT32), shape))
        _check(weft_router_backward(t, c, pointer(indices), pointer(grad_weights), Cfloat(grad_aux), Cfloat(grad_z),
                                    g, C_NULL))
    end
    return grad
end

"""
    update_bias!(bias::Vector{Float32}, tokens_per_expert::Vector{Int64}, rate) -> bias

`weft_router_update_bias`: bias[e] += rate * sign(mean - load[e]), load = tokens_per_expert.
"""
function update_bias!(bias::Vector{Float32}, tokens_per_expert::Vector{Int64}, rate::Real)
    _drain()
    length(tokens_per_expert) == length(bias) ||
        _invalid("tokens_per_expert has $(length(tokens_per_expert)) values, bias $(length(bias))")
    GC.@preserve bias tokens_per_expert begin
        _check(weft_router_update_bias(pointer(bias), pointer(tokens_per_expert), Cint(length(bias)), Cfloat(rate)))
    end
    return bias
end

"""
    moe_layout(indices::Matrix{Int32}, experts, nranks; expert_rank=nothing) -> NamedTuple

`weft_moe_layout` of `indices` (k, T): `(tokens_per_rank, tokens_per_expert, token_in_rank)`,
token_in_rank an (nranks, T) UInt8 matrix. `expert_rank`: nothing = contiguous blocks.
"""
function moe_layout(indices::Matrix{Int32}, experts::Integer, nranks::Integer; expert_rank=nothing)
    _drain()
    k, tokens = size(indices)
    er = expert_rank === nothing ? nothing : Int32.(collect(expert_rank))
    er === nothing || length(er) == experts || _invalid("expert_rank has $(length(er)) values, expected experts = $experts")
    per_rank, per_expert = zeros(Int64, nranks), zeros(Int64, experts)
    in_rank = zeros(UInt8, nranks, tokens)
    GC.@preserve indices er per_rank per_expert in_rank begin
        _check(weft_moe_layout(pointer(indices), Csize_t(tokens), Cint(k), Cint(experts), Cint(nranks),
                               er === nothing ? Ptr{Int32}(C_NULL) : pointer(er), pointer(per_rank),
                               pointer(per_expert), pointer(in_rank)))
    end
    return (tokens_per_rank=per_rank, tokens_per_expert=per_expert, token_in_rank=in_rank)
end

# ------------------------------------------------------------------ dispatch and combine

"""
    Moe(comm, experts, hidden; dtype=Weft.FLOAT32, expert_rank=nothing, expert_alignment=0,
        fp8_dispatch=false)

`weft_moe_create`, collective (every rank the same arguments): dispatch and combine of tokens of
`hidden` elements (dtype FLOAT32, FLOAT16, or BFLOAT16 as UInt16 bits) between the ranks of
`comm`. `close(m)` frees it; a finalizer queues it otherwise.
"""
mutable struct Moe
    handle::Ptr{Cvoid}
    comm::Comm
    hidden::Int
    dtype::Dtype
end

function _finalize_moe(m::Moe)
    h = m.handle
    h == C_NULL && return nothing
    _enqueue((:moe, h, m.comm), m, _finalize_moe) && (m.handle = C_NULL)
    return nothing
end

function Moe(c::Comm, experts::Integer, hidden::Integer; dtype::Dtype=FLOAT32, expert_rank=nothing,
             expert_alignment::Integer=0, fp8_dispatch::Bool=false)
    _drain()
    _check_open(c)
    er = expert_rank === nothing ? nothing : Int32.(collect(expert_rank))
    er === nothing || length(er) == experts || _invalid("expert_rank has $(length(er)) values, expected experts = $experts")
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve er begin
        cfg = Ref(MoeConfigC(Csize_t(sizeof(MoeConfigC)), Cint(experts), Csize_t(hidden), Cint(dtype),
                             er === nothing ? Ptr{Int32}(C_NULL) : pointer(er), Csize_t(expert_alignment),
                             Cint(fp8_dispatch), Cint(0)))
        _check(weft_moe_create(c.handle, cfg, out))
    end
    m = Moe(out[], c, Int(hidden), dtype)
    finalizer(_finalize_moe, m)
    return m
end

function Base.close(m::Moe)
    _drain()
    h = m.handle
    h == C_NULL && return nothing
    m.handle = C_NULL
    _check(weft_moe_destroy(h))
    return nothing
end

"""
    MoeHandle

What one [`dispatch`](@ref) delivered on this rank (`weft_moe_handle_t`), kept for combine and
the backward passes. Fields (copies, 0-based numbers): `tokens`, `topk` (this rank's dispatch),
`rows`, `local_experts`, `counts`, `offsets` (length L + 1), `row_expert`, `row_weight`,
`row_source_rank`, `row_source_token`. The received tokens: [`received`](@ref). `close(h)` frees
it; a finalizer queues it otherwise.
"""
mutable struct MoeHandle
    handle::Ptr{Cvoid}
    moe::Moe
    tokens_data::Ptr{Cvoid}
    tokens::Int
    topk::Int
    rows::Int
    local_experts::Vector{Int32}
    counts::Vector{Int64}
    offsets::Vector{Int64}
    row_expert::Vector{Int32}
    row_weight::Vector{Float32}
    row_source_rank::Vector{Int32}
    row_source_token::Vector{Int64}
end

function _finalize_moe_handle(h::MoeHandle)
    p = h.handle
    p == C_NULL && return nothing
    _enqueue((:moe_handle, p, h.moe), h, _finalize_moe_handle) && (h.handle = C_NULL)
    return nothing
end

# Handles before their Moe, Moes before their communicators (called from _drain).
function _drain_moe(items)
    for (kind, h, _) in items
        kind === :moe_handle && weft_moe_handle_destroy(h)
    end
    for (kind, h, _) in items
        kind === :moe && weft_moe_destroy(h)
    end
    return nothing
end

_copy_c(p::Ptr{T}, n::Integer) where {T} = (p == C_NULL || n <= 0) ? T[] : copy(unsafe_wrap(Array, p, Int(n)))

_moe_eltype(d::Dtype) = d == FLOAT32 ? Float32 : d == FLOAT16 ? Float16 : d == BFLOAT16 ? UInt16 :
                        _invalid("the Moe's dtype $d is not FLOAT32, FLOAT16 or BFLOAT16")

function _check_moe(m::Moe, ::Type{T}, what) where {T}
    m.handle == C_NULL && _invalid("the Moe is closed")
    T === _moe_eltype(m.dtype) || _invalid("$what has element type $T; the Moe's dtype is $(m.dtype)")
    return nothing
end

"""
    dispatch(m::Moe, x::Matrix, indices::Matrix{Int32}, weights::Matrix{Float32}) -> MoeHandle

`weft_moe_dispatch`, collective: x (H, T), indices and weights (k, T); T may be 0 and differ
between ranks.
"""
function dispatch(m::Moe, x::Matrix{T}, indices::Matrix{Int32}, weights::Matrix{Float32}) where {T}
    _drain()
    _check_moe(m, T, "x")
    k, tokens = size(indices)
    size(weights) == (k, tokens) || _invalid("weights have size $(size(weights)), expected (k, T) = $((k, tokens))")
    size(x) == (m.hidden, tokens) || _invalid("x has size $(size(x)), expected (H, T) = $((m.hidden, tokens))")
    shape = Int64[tokens, m.hidden]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve x indices weights shape begin
        t = Ref(_moe_tensor(x, Cint(m.dtype), shape))
        _check(weft_moe_dispatch(m.handle, t, pointer(indices), pointer(weights), Csize_t(tokens), Cint(k), C_NULL, out))
    end
    rv = Ref(_moe_received_init())
    st = weft_moe_handle_received(out[], rv)
    if st != 0
        err = WeftError(_status(st), unsafe_string(weft_last_error()))
        weft_moe_handle_destroy(out[])
        throw(err)
    end
    r = rv[]
    rows, l = Int(r.rows), Int(r.local_experts)
    h = MoeHandle(out[], m, r.tokens.data + r.tokens.byte_offset, tokens, k, rows, _copy_c(r.experts, l), _copy_c(r.counts, l),
                  _copy_c(r.offsets, l + 1), _copy_c(r.row_expert, rows), _copy_c(r.row_weight, rows),
                  _copy_c(r.row_source_rank, rows), _copy_c(r.row_source_token, rows))
    finalizer(_finalize_moe_handle, h)
    return h
end

"    received(h::MoeHandle) -> Matrix: a copy of the received rows, (H, rows) (padding rows zero)."
function received(h::MoeHandle)
    h.handle == C_NULL && _invalid("the MoeHandle is closed")
    T = _moe_eltype(h.moe.dtype)
    h.rows == 0 && return zeros(T, h.moe.hidden, 0)
    return copy(unsafe_wrap(Array, Ptr{T}(h.tokens_data), (h.moe.hidden, h.rows)))
end

function Base.close(h::MoeHandle)
    _drain()
    p = h.handle
    p == C_NULL && return nothing
    h.handle, h.tokens_data = C_NULL, C_NULL
    _check(weft_moe_handle_destroy(p))
    return nothing
end

"""
    combine!(m::Moe, h::MoeHandle, expert_out::Matrix, out::Matrix; weighted=true) -> out

`weft_moe_combine`, collective: expert_out (H, rows) in the received layout; out (H, T) becomes
per token the sum over its kept slots in order (weighted by the routing weights unless
`weighted=false`, the backward of dispatch).
"""
function combine!(m::Moe, h::MoeHandle, expert_out::Matrix{T}, out::Matrix{T}; weighted::Bool=true) where {T}
    _drain()
    _check_moe(m, T, "expert_out")
    h.handle == C_NULL && _invalid("the MoeHandle is closed")
    size(expert_out) == (m.hidden, h.rows) || _invalid("expert_out has size $(size(expert_out)), expected (H, rows) = $((m.hidden, h.rows))")
    size(out) == (m.hidden, h.tokens) || _invalid("out has size $(size(out)), expected (H, T) = $((m.hidden, h.tokens))")
    es, os = Int64[h.rows, m.hidden], Int64[h.tokens, m.hidden]
    GC.@preserve expert_out out es os begin
        e, o = Ref(_moe_tensor(expert_out, Cint(m.dtype), es)), Ref(_moe_tensor(out, Cint(m.dtype), os))
        _check(weft_moe_combine(m.handle, h.handle, e, Cint(weighted), o, C_NULL))
    end
    return out
end

"""
    combine_backward!(m::Moe, h::MoeHandle, grad_out::Matrix, grad_expert_out::Matrix,
                      grad_weights::Matrix{Float32})

`weft_moe_combine_backward`, collective: from grad_out (H, T) writes grad_expert_out (H, rows)
and grad_weights (k, T).
"""
function combine_backward!(m::Moe, h::MoeHandle, grad_out::Matrix{T}, grad_expert_out::Matrix{T},
                           grad_weights::Matrix{Float32}) where {T}
    _drain()
    _check_moe(m, T, "grad_out")
    h.handle == C_NULL && _invalid("the MoeHandle is closed")
    size(grad_out) == (m.hidden, h.tokens) || _invalid("grad_out has size $(size(grad_out)), expected $((m.hidden, h.tokens))")
    size(grad_expert_out) == (m.hidden, h.rows) ||
        _invalid("grad_expert_out has size $(size(grad_expert_out)), expected $((m.hidden, h.rows))")
    size(grad_weights) == (h.topk, h.tokens) || _invalid("grad_weights have size $(size(grad_weights)), expected $((h.topk, h.tokens))")
    gs, es = Int64[h.tokens, m.hidden], Int64[h.rows, m.hidden]
    GC.@preserve grad_out grad_expert_out grad_weights gs es begin
        g, e = Ref(_moe_tensor(grad_out, Cint(m.dtype), gs)), Ref(_moe_tensor(grad_expert_out, Cint(m.dtype), es))
        _check(weft_moe_combine_backward(m.handle, h.handle, g, e, pointer(grad_weights), C_NULL))
    end
    return nothing
end
