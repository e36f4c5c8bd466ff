# Raw ccall wrappers of weft/moe.h (router, dispatch layout, dispatch and combine), one per C
# function in the header's order, and its structs. Included from Weft.jl after capi_pipeline.jl;
# the same conventions (arguments passed as given, the C status returned). A library built
# before moe.h lacks these functions: it still loads, and calling one of them throws
# ERR_UNSUPPORTED naming it (_moesym).
#
# UNTESTED: no Julia toolchain was available when this was written; the layouts below were
# checked against the C compiler's sizeof/offsetof (as the Rust binding's tests do), not by Julia.

const WEFT_MOE_DROPPED = Int32(-1)
const WEFT_ROUTER_SOFTMAX = Cint(0)
const WEFT_ROUTER_TOPK_SOFTMAX = Cint(1)
const WEFT_ROUTER_SIGMOID = Cint(2)
const WEFT_DROP_NONE = Cint(0)
const WEFT_DROP_BY_PROBABILITY = Cint(1)
const WEFT_DROP_BY_POSITION = Cint(2)

# weft_router_config_t (72 bytes; bias at 32, capacity_factor at 48, z_loss_coeff at 60, selector at 64).
struct RouterConfigC
    struct_size::Csize_t
    experts::Cint
    topk::Cint
    score::Cint
    normalize::Cint
    groups::Cint
    topk_groups::Cint
    bias::Ptr{Float32}
    drop::Cint
    capacity_factor::Cdouble
    aux_loss_coeff::Cfloat
    z_loss_coeff::Cfloat
    selector::Cint
end

# weft_router_result_t (48 bytes; aux_loss at 40).
struct RouterResultC
    struct_size::Csize_t
    indices::Ptr{Int32}
    weights::Ptr{Float32}
    tokens_per_expert::Ptr{Int64}
    selected_per_expert::Ptr{Int64}
    aux_loss::Cfloat
    z_loss::Cfloat
end

# weft_moe_config_t (56 bytes; dtype at 24, expert_rank at 32, device at 52).
struct MoeConfigC
    struct_size::Csize_t
    experts::Cint
    hidden::Csize_t
    dtype::Cint
    expert_rank::Ptr{Int32}
    expert_alignment::Csize_t
    fp8_dispatch::Cint
    device::Cint
end

# weft_moe_received_t (128 bytes; rows at 56, experts at 72, row_source_token at 120).
struct MoeReceivedC
    struct_size::Csize_t
    tokens::TensorC
    rows::Csize_t
    local_experts::Cint
    experts::Ptr{Int32}
    counts::Ptr{Int64}
    offsets::Ptr{Int64}
    row_expert::Ptr{Int32}
    row_weight::Ptr{Float32}
    row_source_rank::Ptr{Int32}
    row_source_token::Ptr{Int64}
end

_router_result_init() = RouterResultC(Csize_t(sizeof(RouterResultC)), Ptr{Int32}(C_NULL), Ptr{Float32}(C_NULL),
                                      Ptr{Int64}(C_NULL), Ptr{Int64}(C_NULL), 0.0f0, 0.0f0)

_moe_received_init() = MoeReceivedC(Csize_t(sizeof(MoeReceivedC)),
                                    TensorC(C_NULL, WEFT_DEVICE_CPU, Cint(0), Cint(0), Cint(FLOAT32),
                                            Ptr{Int64}(C_NULL), Ptr{Int64}(C_NULL), UInt64(0)),
                                    Csize_t(0), Cint(0), Ptr{Int32}(C_NULL), Ptr{Int64}(C_NULL), Ptr{Int64}(C_NULL),
                                    Ptr{Int32}(C_NULL), Ptr{Float32}(C_NULL), Ptr{Int32}(C_NULL), Ptr{Int64}(C_NULL))

# Function pointer of a moe.h function (looked up in the loaded library; these functions are not
# in capi.jl's tables), or ERR_UNSUPPORTED when the library lacks it.
const _moe_syms = Dict{Symbol,Ptr{Cvoid}}()
const _moe_syms_lock = ReentrantLock()

function _moesym(f::Symbol)
    _loaded[] || _load()
    p = lock(_moe_syms_lock) do
        get!(_moe_syms, f) do
            q = Libdl.dlsym(_handle[], f; throw_error=false)
            q === nothing ? C_NULL : q
        end
    end
    p == C_NULL && throw(WeftError(ERR_UNSUPPORTED, "Weft: $f: the loaded libweft ($(library_path())) " *
                                   "does not export it; it was built before weft/moe.h (rebuild libweft)"))
    return p
end

# ---- moe.h: router
weft_router_forward(logits, config, result, stream) =
    ccall(_moesym(:weft_router_forward), Cint, (Ptr{TensorC}, Ptr{RouterConfigC}, Ptr{RouterResultC}, Ptr{Cvoid}),
          logits, config, result, stream)
weft_router_backward(logits, config, indices, grad_weights, grad_aux, grad_z, grad_logits, stream) =
    ccall(_moesym(:weft_router_backward), Cint,
          (Ptr{TensorC}, Ptr{RouterConfigC}, Ptr{Int32}, Ptr{Float32}, Cfloat, Cfloat, Ptr{TensorC}, Ptr{Cvoid}),
          logits, config, indices, grad_weights, grad_aux, grad_z, grad_logits, stream)
weft_router_update_bias(bias, tokens_per_expert, experts, rate) =
    ccall(_moesym(:weft_router_update_bias), Cint, (Ptr{Float32}, Ptr{Int64}, Cint, Cfloat),
          bias, tokens_per_expert, experts, rate)

# ---- moe.h: layout
weft_moe_layout(indices, tokens, topk, experts, nranks, expert_rank, tokens_per_rank, tokens_per_expert, token_in_rank) =
    ccall(_moesym(:weft_moe_layout), Cint,
          (Ptr{Int32}, Csize_t, Cint, Cint, Cint, Ptr{Int32}, Ptr{Int64}, Ptr{Int64}, Ptr{UInt8}),
          indices, tokens, topk, experts, nranks, expert_rank, tokens_per_rank, tokens_per_expert, token_in_rank)

# ---- moe.h: dispatch and combine
weft_moe_create(comm, config, moe) =
    ccall(_moesym(:weft_moe_create), Cint, (Ptr{Cvoid}, Ptr{MoeConfigC}, Ptr{Ptr{Cvoid}}), comm, config, moe)
weft_moe_destroy(moe) = ccall(_moesym(:weft_moe_destroy), Cint, (Ptr{Cvoid},), moe)
weft_moe_dispatch(moe, x, indices, weights, tokens, topk, stream, handle) =
    ccall(_moesym(:weft_moe_dispatch), Cint,
          (Ptr{Cvoid}, Ptr{TensorC}, Ptr{Int32}, Ptr{Float32}, Csize_t, Cint, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          moe, x, indices, weights, tokens, topk, stream, handle)
weft_moe_handle_destroy(handle) = ccall(_moesym(:weft_moe_handle_destroy), Cint, (Ptr{Cvoid},), handle)
weft_moe_handle_received(handle, received) =
    ccall(_moesym(:weft_moe_handle_received), Cint, (Ptr{Cvoid}, Ptr{MoeReceivedC}), handle, received)
weft_moe_combine(moe, handle, expert_out, weighted, out, stream) =
    ccall(_moesym(:weft_moe_combine), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{TensorC}, Cint, Ptr{TensorC}, Ptr{Cvoid}),
          moe, handle, expert_out, weighted, out, stream)
weft_moe_combine_backward(moe, handle, grad_out, grad_expert_out, grad_weights, stream) =
    ccall(_moesym(:weft_moe_combine_backward), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{TensorC}, Ptr{TensorC}, Ptr{Float32}, Ptr{Cvoid}),
          moe, handle, grad_out, grad_expert_out, grad_weights, stream)
