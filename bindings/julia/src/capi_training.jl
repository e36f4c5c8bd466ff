# Raw ccall wrappers of weft/training.h (gradient bucketer, ZeRO, tensor/sequence/context
# parallel regions), one per C function in the header's order, and its structs. Included from
# Weft.jl right after capi.jl; the same conventions (arguments passed as given, the C status
# returned). A library built before training.h lacks these functions: it still loads, and calling
# one of them throws ERR_UNSUPPORTED naming it (_tsym).

const WEFT_WIRE_NATIVE = Cint(0)
const WEFT_WIRE_BF16 = Cint(1)
const WEFT_WIRE_FP8_E4M3 = Cint(2)
const WEFT_WIRE_FP8_BLOCK = 256
const WEFT_BUCKET_ALLREDUCE = Cint(0)
const WEFT_BUCKET_REDUCE_SCATTER = Cint(1)
const WEFT_OPTIMIZER_SGD = Cint(0)
const WEFT_OPTIMIZER_ADAM = Cint(1)
const WEFT_OPTIMIZER_ADAMW = Cint(2)
const WEFT_REGION_COPY = Cint(0)
const WEFT_REGION_REDUCE = Cint(1)
const WEFT_REGION_SCATTER = Cint(2)
const WEFT_REGION_GATHER = Cint(3)
const WEFT_REGION_SEQ_GATHER = Cint(4)
const WEFT_REGION_SEQ_REDUCE_SCATTER = Cint(5)

# weft_bucketer_config_t (56 bytes; error_feedback at 48).
struct BucketerConfigC
    struct_size::Csize_t
    bucket_bytes::Csize_t
    bucket_of::Ptr{Csize_t}
    op::Cint
    wire::Cint
    reduction::Cint
    names::Ptr{Ptr{UInt8}}
    error_feedback::Cint
end

# weft_bucketer_stats_t (40 bytes).
struct BucketerStatsC
    struct_size::Csize_t
    steps::UInt64
    wire_bytes::UInt64
    exposed_ns::UInt64
    launched_late::UInt64
end

# weft_optimizer_config_t (40 bytes).
struct OptimizerConfigC
    struct_size::Csize_t
    kind::Cint
    lr::Float32
    momentum::Float32
    beta1::Float32
    beta2::Float32
    eps::Float32
    weight_decay::Float32
end

# weft_zero_config_t (120 bytes; the optimizer config inline at offset 16, error_feedback at 112).
struct ZeroConfigC
    struct_size::Csize_t
    stage::Cint
    param_dtype::Cint
    optimizer::OptimizerConfigC
    groups::Ptr{Cint}
    group_bytes::Csize_t
    names::Ptr{Ptr{UInt8}}
    grad_op::Cint
    wire::Cint
    max_grad_norm::Float32
    loss_scale::Float32
    dynamic_loss_scale::Cint
    growth::Float32
    backoff::Float32
    growth_interval::Cint
    error_feedback::Cint
end

# weft_zero_step_info_t (40 bytes).
struct ZeroStepInfoC
    struct_size::Csize_t
    skipped::Cint
    grad_norm::Float32
    loss_scale::Float32
    comm_elements::UInt64
    comm_bytes::UInt64
end

# weft_zero_memory_t (48 bytes).
struct ZeroMemoryC
    struct_size::Csize_t
    params::UInt64
    grads::UInt64
    optimizer::UInt64
    buffers::UInt64
    buffers_peak::UInt64
end

const _TRAINING_FUNCTIONS = (
    :weft_bucketer_create, :weft_bucketer_destroy, :weft_bucketer_num_buckets, :weft_bucketer_bucket_of,
    :weft_bucketer_mark_ready, :weft_bucketer_finish, :weft_bucketer_shard, :weft_bucketer_stats,
    :weft_zero_create, :weft_zero_destroy, :weft_zero_num_groups, :weft_zero_group_of, :weft_zero_param,
    :weft_zero_gather, :weft_zero_release, :weft_zero_grad_ready, :weft_zero_step, :weft_zero_memory,
    :weft_zero_save, :weft_zero_load, :weft_region_apply, :weft_ring_shift,
)

# Function pointer of a training.h function, or ERR_UNSUPPORTED when the library lacks it.
function _tsym(f::Symbol)
    p = _sym(f)
    p == C_NULL && throw(WeftError(ERR_UNSUPPORTED, "Weft: $f: the loaded libweft ($(library_path())) " *
                                   "does not export it; it was built before weft/training.h (rebuild libweft)"))
    return p
end

# ---- training.h: gradient bucketer
weft_bucketer_create(comm, grads, ngrads, config, bucketer) =
    ccall(_tsym(:weft_bucketer_create), Cint,
          (Ptr{Cvoid}, Ptr{TensorC}, Csize_t, Ptr{BucketerConfigC}, Ptr{Ptr{Cvoid}}),
          comm, grads, ngrads, config, bucketer)
weft_bucketer_destroy(bucketer) = ccall(_tsym(:weft_bucketer_destroy), Cint, (Ptr{Cvoid},), bucketer)
weft_bucketer_num_buckets(bucketer, nbuckets) =
    ccall(_tsym(:weft_bucketer_num_buckets), Cint, (Ptr{Cvoid}, Ptr{Csize_t}), bucketer, nbuckets)
weft_bucketer_bucket_of(bucketer, grad, bucket, offset) =
    ccall(_tsym(:weft_bucketer_bucket_of), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Csize_t}, Ptr{Csize_t}),
          bucketer, grad, bucket, offset)
weft_bucketer_mark_ready(bucketer, grad, data, stream) =
    ccall(_tsym(:weft_bucketer_mark_ready), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Cvoid}, Ptr{Cvoid}),
          bucketer, grad, data, stream)
weft_bucketer_finish(bucketer, stream) =
    ccall(_tsym(:weft_bucketer_finish), Cint, (Ptr{Cvoid}, Ptr{Cvoid}), bucketer, stream)
weft_bucketer_shard(bucketer, bucket, shard, offset) =
    ccall(_tsym(:weft_bucketer_shard), Cint, (Ptr{Cvoid}, Csize_t, Ptr{TensorC}, Ptr{Csize_t}),
          bucketer, bucket, shard, offset)
weft_bucketer_stats(bucketer, stats) =
    ccall(_tsym(:weft_bucketer_stats), Cint, (Ptr{Cvoid}, Ptr{BucketerStatsC}), bucketer, stats)

# ---- training.h: ZeRO
weft_zero_create(mesh, dp_dim, params, nparams, config, zero) =
    ccall(_tsym(:weft_zero_create), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{TensorC}, Csize_t, Ptr{ZeroConfigC}, Ptr{Ptr{Cvoid}}),
          mesh, dp_dim, params, nparams, config, zero)
weft_zero_destroy(zero) = ccall(_tsym(:weft_zero_destroy), Cint, (Ptr{Cvoid},), zero)
weft_zero_num_groups(zero, ngroups) =
    ccall(_tsym(:weft_zero_num_groups), Cint, (Ptr{Cvoid}, Ptr{Csize_t}), zero, ngroups)
weft_zero_group_of(zero, param, group) =
    ccall(_tsym(:weft_zero_group_of), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Csize_t}), zero, param, group)
weft_zero_param(zero, param, view) =
    ccall(_tsym(:weft_zero_param), Cint, (Ptr{Cvoid}, Csize_t, Ptr{TensorC}), zero, param, view)
weft_zero_gather(zero, group, request) =
    ccall(_tsym(:weft_zero_gather), Cint, (Ptr{Cvoid}, Csize_t, Ptr{Ptr{Cvoid}}), zero, group, request)
weft_zero_release(zero, group) = ccall(_tsym(:weft_zero_release), Cint, (Ptr{Cvoid}, Csize_t), zero, group)
weft_zero_grad_ready(zero, param, grad) =
    ccall(_tsym(:weft_zero_grad_ready), Cint, (Ptr{Cvoid}, Csize_t, Ptr{TensorC}), zero, param, grad)
weft_zero_step(zero, info) = ccall(_tsym(:weft_zero_step), Cint, (Ptr{Cvoid}, Ptr{ZeroStepInfoC}), zero, info)
weft_zero_memory(zero, memory) =
    ccall(_tsym(:weft_zero_memory), Cint, (Ptr{Cvoid}, Ptr{ZeroMemoryC}), zero, memory)
weft_zero_save(zero, path) = ccall(_tsym(:weft_zero_save), Cint, (Ptr{Cvoid}, Cstring), zero, path)
weft_zero_load(zero, path) = ccall(_tsym(:weft_zero_load), Cint, (Ptr{Cvoid}, Cstring), zero, path)

# ---- training.h: tensor / sequence parallel regions, context-parallel ring
weft_region_apply(mesh, dim, region, backward, split_dim, input, output, stream, request) =
    ccall(_tsym(:weft_region_apply), Cint,
          (Ptr{Cvoid}, Cstring, Cint, Cint, Cint, Ptr{TensorC}, Ptr{TensorC}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          mesh, dim, region, backward, split_dim, input, output, stream, request)
weft_ring_shift(mesh, dim, shift, send, recv, stream, request) =
    ccall(_tsym(:weft_ring_shift), Cint,
          (Ptr{Cvoid}, Cstring, Cint, Ptr{TensorC}, Ptr{TensorC}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          mesh, dim, shift, send, recv, stream, request)
