# Raw ccall wrappers of weft/pipeline.h (schedules, timelines, simulation and tuning, the
# executor), one per C function in the header's order, and its structs. Included from Weft.jl
# after capi_training.jl; the same conventions (arguments passed as given, the C status
# returned). A library built before pipeline.h lacks these functions: it still loads, and calling
# one of them throws ERR_UNSUPPORTED naming it (_psym).
#
# UNTESTED: no Julia toolchain was available when this was written; the layouts below were
# checked against the C compiler's sizeof/offsetof (as the Rust binding's tests do), not by Julia.

const WEFT_ACTION_F = Cint(0)
const WEFT_ACTION_B = Cint(1)
const WEFT_ACTION_I = Cint(2)
const WEFT_ACTION_W = Cint(3)
const WEFT_ACTION_SEND_F = Cint(4)
const WEFT_ACTION_RECV_F = Cint(5)
const WEFT_ACTION_SEND_B = Cint(6)
const WEFT_ACTION_RECV_B = Cint(7)
const WEFT_ACTION_REDUCE_GRAD = Cint(8)
const WEFT_SCHEDULE_CUSTOM = Cint(-1)
const WEFT_SCHEDULE_NUM_KINDS = Cint(7)
const WEFT_CSV_COMPUTE_COMMS = Cint(0)
const WEFT_CSV_COMPUTE_ONLY = Cint(1)
const WEFT_TIMELINE_SVG = Cint(0)
const WEFT_TIMELINE_CHROME_TRACE = Cint(1)

# weft_action_t (12 bytes): an array element, layout frozen.
struct ActionC
    kind::Cint
    stage::Int32
    microbatch::Int32
end

# weft_schedule_config_t (24 bytes).
struct ScheduleConfigC
    struct_size::Csize_t
    ranks::Cint
    microbatches::Cint
    stages_per_rank::Cint
    reduce_grad::Cint
end

# weft_schedule_info_t (32 bytes).
struct ScheduleInfoC
    struct_size::Csize_t
    kind::Cint
    ranks::Cint
    stages::Cint
    microbatches::Cint
    stages_per_rank::Cint
end

# weft_timeline_info_t (32 bytes; makespan at offset 16).
struct TimelineInfoC
    struct_size::Csize_t
    ranks::Cint
    makespan::Cdouble
    bubble_fraction::Cdouble
end

# weft_rank_stats_t (40 bytes).
struct RankStatsC
    struct_size::Csize_t
    busy::Cdouble
    idle::Cdouble
    peak_activations::Cint
    peak_activation_bytes::Cdouble
end

# weft_pipeline_costs_t (112 bytes; cost_model at 104, microbatch_size at 108).
struct PipelineCostsC
    struct_size::Csize_t
    nstages::Cint
    forward::Ptr{Cdouble}
    backward::Ptr{Cdouble}
    backward_input::Ptr{Cdouble}
    backward_weight::Ptr{Cdouble}
    activation_bytes::Ptr{Cdouble}
    weight_grad_bytes::Ptr{Cdouble}
    boundary_bytes::Ptr{Cdouble}
    latency::Cdouble
    bandwidth::Cdouble
    overhead::Cdouble
    reduce_grad::Ptr{Cdouble}
    cost_model::Cint
    microbatch_size::Cint
end

# weft_tune_config_t (128 bytes; cost_model at 120).
struct TuneConfigC
    struct_size::Csize_t
    ranks::Cint
    layers::Cint
    layer_forward::Ptr{Cdouble}
    layer_backward::Ptr{Cdouble}
    global_batch::Cint
    microbatch_overhead::Cdouble
    activation_bytes_per_sample::Cdouble
    boundary_bytes_per_sample::Cdouble
    latency::Cdouble
    bandwidth::Cdouble
    memory_cap::Cdouble
    static_bytes::Cdouble
    kinds::Ptr{Cint}
    nkinds::Csize_t
    max_stages_per_rank::Cint
    max_microbatches::Cint
    cost_model::Cint
end

# weft_tune_candidate_t (48 bytes): an array element, layout frozen.
struct TuneCandidateC
    kind::Cint
    microbatches::Cint
    stages_per_rank::Cint
    microbatch_size::Cint
    step_time::Cdouble
    bubble_fraction::Cdouble
    peak_bytes::Cdouble
    fits::Cint
end

# weft_stage_call_t (32 bytes).
struct StageCallC
    kind::Cint
    stage::Cint
    microbatch::Cint
    input::Ptr{TensorC}
    output::Ptr{TensorC}
end

# weft_pipeline_config_t (88 bytes); the callbacks are C function pointers (weft_stage_fn).
struct PipelineConfigC
    struct_size::Csize_t
    forward::Ptr{Cvoid}
    backward::Ptr{Cvoid}
    backward_input::Ptr{Cvoid}
    backward_weight::Ptr{Cvoid}
    reduce_grad::Ptr{Cvoid}
    user_data::Ptr{Cvoid}
    boundaries::Ptr{TensorC}
    nboundaries::Csize_t
    stream::Ptr{Cvoid}
    record::Cint
end

const _PIPELINE_FUNCTIONS = (
    :weft_schedule_generate, :weft_schedule_create, :weft_schedule_destroy, :weft_schedule_info,
    :weft_schedule_actions, :weft_schedule_stage_rank, :weft_schedule_validate, :weft_schedule_to_csv,
    :weft_schedule_from_csv, :weft_schedule_save, :weft_schedule_load, :weft_timeline_info, :weft_timeline_rank,
    :weft_timeline_write, :weft_timeline_destroy, :weft_schedule_simulate, :weft_schedule_tune,
    :weft_pipeline_create, :weft_pipeline_run, :weft_pipeline_destroy, :weft_pipeline_set_error,
)

# Function pointer of a pipeline.h function, or ERR_UNSUPPORTED when the library lacks it.
function _psym(f::Symbol)
    p = _sym(f)
    p == C_NULL && throw(WeftError(ERR_UNSUPPORTED, "Weft: $f: the loaded libweft ($(library_path())) " *
                                   "does not export it; it was built before weft/pipeline.h (rebuild libweft)"))
    return p
end

# ---- pipeline.h: schedules
weft_schedule_generate(kind, config, schedule) =
    ccall(_psym(:weft_schedule_generate), Cint, (Cint, Ptr{ScheduleConfigC}, Ptr{Ptr{Cvoid}}), kind, config, schedule)
weft_schedule_create(nranks, actions, counts, schedule) =
    ccall(_psym(:weft_schedule_create), Cint, (Cint, Ptr{Ptr{ActionC}}, Ptr{Csize_t}, Ptr{Ptr{Cvoid}}),
          nranks, actions, counts, schedule)
weft_schedule_destroy(schedule) = ccall(_psym(:weft_schedule_destroy), Cint, (Ptr{Cvoid},), schedule)
weft_schedule_info(schedule, info) =
    ccall(_psym(:weft_schedule_info), Cint, (Ptr{Cvoid}, Ptr{ScheduleInfoC}), schedule, info)
weft_schedule_actions(schedule, rank, actions, count) =
    ccall(_psym(:weft_schedule_actions), Cint, (Ptr{Cvoid}, Cint, Ptr{Ptr{ActionC}}, Ptr{Csize_t}),
          schedule, rank, actions, count)
weft_schedule_stage_rank(schedule, stage, rank) =
    ccall(_psym(:weft_schedule_stage_rank), Cint, (Ptr{Cvoid}, Cint, Ptr{Cint}), schedule, stage, rank)
weft_schedule_validate(schedule) = ccall(_psym(:weft_schedule_validate), Cint, (Ptr{Cvoid},), schedule)
weft_schedule_to_csv(schedule, format, text, capacity, length) =
    ccall(_psym(:weft_schedule_to_csv), Cint, (Ptr{Cvoid}, Cint, Ptr{UInt8}, Csize_t, Ptr{Csize_t}),
          schedule, format, text, capacity, length)
weft_schedule_from_csv(text, length, schedule) =
    ccall(_psym(:weft_schedule_from_csv), Cint, (Ptr{UInt8}, Csize_t, Ptr{Ptr{Cvoid}}), text, length, schedule)
weft_schedule_save(schedule, path) = ccall(_psym(:weft_schedule_save), Cint, (Ptr{Cvoid}, Cstring), schedule, path)
weft_schedule_load(path, schedule) = ccall(_psym(:weft_schedule_load), Cint, (Cstring, Ptr{Ptr{Cvoid}}), path, schedule)

# ---- pipeline.h: timelines
weft_timeline_info(timeline, info) =
    ccall(_psym(:weft_timeline_info), Cint, (Ptr{Cvoid}, Ptr{TimelineInfoC}), timeline, info)
weft_timeline_rank(timeline, rank, start, stop, count, stats) =
    ccall(_psym(:weft_timeline_rank), Cint,
          (Ptr{Cvoid}, Cint, Ptr{Ptr{Cdouble}}, Ptr{Ptr{Cdouble}}, Ptr{Csize_t}, Ptr{RankStatsC}),
          timeline, rank, start, stop, count, stats)
weft_timeline_write(timeline, format, path) =
    ccall(_psym(:weft_timeline_write), Cint, (Ptr{Cvoid}, Cint, Cstring), timeline, format, path)
weft_timeline_destroy(timeline) = ccall(_psym(:weft_timeline_destroy), Cint, (Ptr{Cvoid},), timeline)

# ---- pipeline.h: simulation and tuning
weft_schedule_simulate(schedule, costs, timeline) =
    ccall(_psym(:weft_schedule_simulate), Cint, (Ptr{Cvoid}, Ptr{PipelineCostsC}, Ptr{Ptr{Cvoid}}),
          schedule, costs, timeline)
weft_schedule_tune(config, candidates, capacity, count, best) =
    ccall(_psym(:weft_schedule_tune), Cint, (Ptr{TuneConfigC}, Ptr{TuneCandidateC}, Csize_t, Ptr{Csize_t}, Ptr{Cint}),
          config, candidates, capacity, count, best)

# ---- pipeline.h: the executor
weft_pipeline_create(comm, schedule, config, pipeline) =
    ccall(_psym(:weft_pipeline_create), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{PipelineConfigC}, Ptr{Ptr{Cvoid}}),
          comm, schedule, config, pipeline)
weft_pipeline_run(pipeline, record) =
    ccall(_psym(:weft_pipeline_run), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), pipeline, record)
weft_pipeline_destroy(pipeline) = ccall(_psym(:weft_pipeline_destroy), Cint, (Ptr{Cvoid},), pipeline)
weft_pipeline_set_error(message) = ccall(_psym(:weft_pipeline_set_error), Cint, (Cstring,), message)
