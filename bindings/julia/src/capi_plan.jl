# Raw ccall wrappers of weft/plan.h (the planner), one per C function in the header's order, and
# its structs. Included from Weft.jl after capi_plugin.jl; the same conventions as capi.jl
# (arguments passed as given, the C status returned). A library built before plan.h lacks these
# functions: it still loads, and calling one of them throws ERR_UNSUPPORTED naming it (_plansym).
#
# UNTESTED: no Julia toolchain was available when this was written; the layouts below are
# checked against the C compiler's sizeof/offsetof by scripts/check-julia, not by Julia.

const WEFT_PLAN_FORMAT_TABLE = Cint(0)
const WEFT_PLAN_FORMAT_REPORT = Cint(1)
const WEFT_PLAN_FORMAT_JSON = Cint(2)

# weft_plan_collective_kind_t
const WEFT_PLAN_ALLREDUCE = Cint(0)
const WEFT_PLAN_ALLTOALL = Cint(1)

# weft_plan_layer_t (104 bytes; params at 24, tp_replicated at 80, tp_allreduces at 88,
# shared_params at 96): an array element whose stride is the config's layer_size (the first
# release's 80 ended at context_bytes).
struct PlanLayerC
    name::Ptr{UInt8}
    count::Cint
    experts::Cint
    top_k::Cint
    tensor_parallel::Cint
    params::Cdouble
    forward_flops::Cdouble
    forward_seconds::Cdouble
    backward_seconds::Cdouble
    activation_bytes::Cdouble
    output_bytes::Cdouble
    context_bytes::Cdouble
    tp_replicated::Cdouble
    tp_allreduces::Cint
    shared_params::Cdouble
end

# weft_plan_collective_t (16 bytes; seconds at 8): an array element, layout frozen.
struct PlanCollectiveC
    kind::Cint
    ranks::Cint
    seconds::Cdouble
end

# weft_plan_cluster_t (80 bytes; intra_collectives at 64).
struct PlanClusterC
    struct_size::Csize_t
    hosts::Cint
    ranks_per_host::Cint
    memory_per_rank::Cdouble
    flops_per_rank::Cdouble
    intra_bandwidth::Cdouble
    intra_latency::Cdouble
    inter_bandwidth::Cdouble
    inter_latency::Cdouble
    intra_collectives::Ptr{PlanCollectiveC}
    num_intra_collectives::Csize_t
end

# weft_plan_layout_t (112 bytes; step_seconds at 48).
struct PlanLayoutC
    struct_size::Csize_t
    dp::Cint
    tp::Cint
    pp::Cint
    ep::Cint
    cp::Cint
    zero_stage::Cint
    schedule::Cint
    microbatches::Cint
    stages_per_rank::Cint
    fits::Cint
    step_seconds::Cdouble
    compute_seconds::Cdouble
    communication_seconds::Cdouble
    bubble_fraction::Cdouble
    memory_per_rank::Cdouble
    static_bytes::Cdouble
    activation_bytes::Cdouble
    communication_bytes::Cdouble
end

# weft_plan_config_t (152 bytes; kinds at 96, layout at 120, layer_size at 136,
# grad_allreduce_bytes at 144).
struct PlanConfigC
    struct_size::Csize_t
    layers::Ptr{PlanLayerC}
    num_layers::Csize_t
    cluster::Ptr{PlanClusterC}
    global_batch::Cint
    ranks::Cint
    weight_bytes::Cdouble
    grad_bytes::Cdouble
    optimizer_bytes::Cdouble
    microbatch_overhead::Cdouble
    top::Cint
    include_infeasible::Cint
    max_pp::Cint
    max_tp::Cint
    max_cp::Cint
    tp_across_hosts::Cint
    kinds::Ptr{Cint}
    nkinds::Csize_t
    max_microbatches::Cint
    layout::Ptr{PlanLayoutC}
    scaling::Cint
    layer_size::Csize_t
    grad_allreduce_bytes::Cdouble
end

# weft_plan_info_t (40 bytes).
struct PlanInfoC
    struct_size::Csize_t
    ranks::Cint
    global_batch::Cint
    count::Csize_t
    searched::Csize_t
    feasible::Csize_t
end

# weft_plan_scaling_t (64 bytes).
struct PlanScalingC
    struct_size::Csize_t
    ranks::Cint
    one_rank_seconds::Cdouble
    step_seconds::Cdouble
    speedup::Cdouble
    efficiency::Cdouble
    serial_fraction::Cdouble
    gustafson_speedup::Cdouble
end

# weft_plan_scaling_point_t (64 bytes): an array element, layout frozen.
struct PlanScalingPointC
    ranks::Cint
    weak_batch::Cint
    fits::Cint
    strong_seconds::Cdouble
    strong_speedup::Cdouble
    amdahl_speedup::Cdouble
    weak_seconds::Cdouble
    weak_speedup::Cdouble
    gustafson_speedup::Cdouble
end

const _plan_syms = Dict{Symbol,Ptr{Cvoid}}()
const _plan_syms_lock = ReentrantLock()

# Function pointer of a plan.h function, or ERR_UNSUPPORTED when the library lacks it.
function _plansym(f::Symbol)
    _loaded[] || _load()
    p = lock(_plan_syms_lock) do
        get!(_plan_syms, f) do
            q = Libdl.dlsym(_handle[], f; throw_error=false)
            q === nothing ? C_NULL : q
        end
    end
    p == C_NULL && throw(WeftError(ERR_UNSUPPORTED, "Weft: $f: the loaded libweft ($(library_path())) " *
                                   "does not export it; it was built before weft/plan.h (rebuild libweft)"))
    return p
end

weft_plan_create(config, plan) =
    ccall(_plansym(:weft_plan_create), Cint, (Ptr{PlanConfigC}, Ptr{Ptr{Cvoid}}), config, plan)
weft_plan_load(model_path, cluster_path, config, plan) =
    ccall(_plansym(:weft_plan_load), Cint, (Cstring, Cstring, Ptr{PlanConfigC}, Ptr{Ptr{Cvoid}}),
          model_path, cluster_path, config, plan)
weft_plan_destroy(plan) = ccall(_plansym(:weft_plan_destroy), Cint, (Ptr{Cvoid},), plan)
weft_plan_info(plan, info) = ccall(_plansym(:weft_plan_info), Cint, (Ptr{Cvoid}, Ptr{PlanInfoC}), plan, info)
weft_plan_layout(plan, index, layout) =
    ccall(_plansym(:weft_plan_layout), Cint, (Ptr{Cvoid}, Csize_t, Ptr{PlanLayoutC}), plan, index, layout)
weft_plan_scaling(plan, summary, points, capacity, count) =
    ccall(_plansym(:weft_plan_scaling), Cint,
          (Ptr{Cvoid}, Ptr{PlanScalingC}, Ptr{PlanScalingPointC}, Csize_t, Ptr{Csize_t}),
          plan, summary, points, capacity, count)
weft_plan_format(plan, what, text, capacity, length) =
    ccall(_plansym(:weft_plan_format), Cint, (Ptr{Cvoid}, Cint, Ptr{UInt8}, Csize_t, Ptr{Csize_t}),
          plan, what, text, capacity, length)
