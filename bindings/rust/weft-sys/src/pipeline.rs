//! Types and constants of `weft/pipeline.h` (schedules, timelines, simulation and tuning, the
//! executor), in the header's order. The functions are declared in `lib.rs`'s `extern "C"`
//! block with the others.
use core::ffi::{c_int, c_void};

use crate::{weft_status_t, weft_tensor_t};

// ------------------------------------------------------------------ schedules

/// Opaque `struct weft_schedule`.
#[repr(C)]
pub struct weft_schedule {
    _private: [u8; 0],
}
/// `weft_schedule_t`: an opaque handle (`*mut weft_schedule`).
pub type weft_schedule_t = *mut weft_schedule;

/// `enum weft_action_kind`.
pub type weft_action_kind_t = c_int;
/// `WEFT_ACTION_F`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_F: weft_action_kind_t = 0;
/// `WEFT_ACTION_B`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_B: weft_action_kind_t = 1;
/// `WEFT_ACTION_I`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_I: weft_action_kind_t = 2;
/// `WEFT_ACTION_W`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_W: weft_action_kind_t = 3;
/// `WEFT_ACTION_SEND_F`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_SEND_F: weft_action_kind_t = 4;
/// `WEFT_ACTION_RECV_F`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_RECV_F: weft_action_kind_t = 5;
/// `WEFT_ACTION_SEND_B`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_SEND_B: weft_action_kind_t = 6;
/// `WEFT_ACTION_RECV_B`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_RECV_B: weft_action_kind_t = 7;
/// `WEFT_ACTION_REDUCE_GRAD`, a value of `weft_action_kind_t`.
pub const WEFT_ACTION_REDUCE_GRAD: weft_action_kind_t = 8;

/// `weft_action_t`: an array element, layout frozen (no struct_size).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct weft_action_t {
    /// C field `kind` of `weft_action_t`.
    pub kind: weft_action_kind_t,
    /// C field `stage` of `weft_action_t`.
    pub stage: i32,
    /// -1 for REDUCE_GRAD.
    pub microbatch: i32,
}

/// `enum weft_schedule_kind`.
pub type weft_schedule_kind_t = c_int;
/// `WEFT_SCHEDULE_CUSTOM`: made by weft_schedule_create / from_csv (a loaded file keeps the kind it
/// was saved with).
pub const WEFT_SCHEDULE_CUSTOM: weft_schedule_kind_t = -1;
/// `WEFT_SCHEDULE_GPIPE`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_GPIPE: weft_schedule_kind_t = 0;
/// `WEFT_SCHEDULE_ONE_F_ONE_B`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_ONE_F_ONE_B: weft_schedule_kind_t = 1;
/// `WEFT_SCHEDULE_INTERLEAVED_1F1B`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_INTERLEAVED_1F1B: weft_schedule_kind_t = 2;
/// `WEFT_SCHEDULE_ZB_H1`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_ZB_H1: weft_schedule_kind_t = 3;
/// `WEFT_SCHEDULE_ZB_H2`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_ZB_H2: weft_schedule_kind_t = 4;
/// `WEFT_SCHEDULE_ZB_V`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_ZB_V: weft_schedule_kind_t = 5;
/// `WEFT_SCHEDULE_DUALPIPE_V`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_DUALPIPE_V: weft_schedule_kind_t = 6;
/// `WEFT_SCHEDULE_NUM_KINDS`, a value of `weft_schedule_kind_t`.
pub const WEFT_SCHEDULE_NUM_KINDS: weft_schedule_kind_t = 7;

/// `weft_schedule_config_t`; start from [`WEFT_SCHEDULE_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_schedule_config_t {
    /// C field `struct_size` of `weft_schedule_config_t`.
    pub struct_size: usize,
    /// C field `ranks` of `weft_schedule_config_t`.
    pub ranks: c_int,
    /// C field `microbatches` of `weft_schedule_config_t`.
    pub microbatches: c_int,
    /// C field `stages_per_rank` of `weft_schedule_config_t`.
    pub stages_per_rank: c_int,
    /// C field `reduce_grad` of `weft_schedule_config_t`.
    pub reduce_grad: c_int,
}

/// `WEFT_SCHEDULE_CONFIG_INIT`.
pub const WEFT_SCHEDULE_CONFIG_INIT: weft_schedule_config_t = weft_schedule_config_t {
    struct_size: core::mem::size_of::<weft_schedule_config_t>(),
    ranks: 1,
    microbatches: 1,
    stages_per_rank: 0,
    reduce_grad: 0,
};

/// `weft_schedule_info_t`; start from [`WEFT_SCHEDULE_INFO_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_schedule_info_t {
    /// C field `struct_size` of `weft_schedule_info_t`.
    pub struct_size: usize,
    /// The generator, or WEFT_SCHEDULE_CUSTOM.
    pub kind: weft_schedule_kind_t,
    /// P.
    pub ranks: c_int,
    /// S.
    pub stages: c_int,
    /// M.
    pub microbatches: c_int,
    /// The most stages any rank holds.
    pub stages_per_rank: c_int,
}

/// `WEFT_SCHEDULE_INFO_INIT`.
pub const WEFT_SCHEDULE_INFO_INIT: weft_schedule_info_t = weft_schedule_info_t {
    struct_size: core::mem::size_of::<weft_schedule_info_t>(),
    kind: WEFT_SCHEDULE_CUSTOM,
    ranks: 0,
    stages: 0,
    microbatches: 0,
    stages_per_rank: 0,
};

/// `enum weft_csv_format`.
pub type weft_csv_format_t = c_int;
/// `WEFT_CSV_COMPUTE_COMMS`: every action (torch's "compute_comms").
pub const WEFT_CSV_COMPUTE_COMMS: weft_csv_format_t = 0;
/// `WEFT_CSV_COMPUTE_ONLY`: f, B, I, W only (torch's "compute_only").
pub const WEFT_CSV_COMPUTE_ONLY: weft_csv_format_t = 1;

// ------------------------------------------------------------------ timelines

/// Opaque `struct weft_timeline`.
#[repr(C)]
pub struct weft_timeline {
    _private: [u8; 0],
}
/// `weft_timeline_t`: an opaque handle (`*mut weft_timeline`).
pub type weft_timeline_t = *mut weft_timeline;

/// `weft_timeline_info_t`; start from [`WEFT_TIMELINE_INFO_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_timeline_info_t {
    /// C field `struct_size` of `weft_timeline_info_t`.
    pub struct_size: usize,
    /// C field `ranks` of `weft_timeline_info_t`.
    pub ranks: c_int,
    /// The latest end over all ranks.
    pub makespan: f64,
    /// `idle / (ranks * makespan)`, idle = makespan minus compute time.
    pub bubble_fraction: f64,
}

/// `WEFT_TIMELINE_INFO_INIT`.
pub const WEFT_TIMELINE_INFO_INIT: weft_timeline_info_t = weft_timeline_info_t {
    struct_size: core::mem::size_of::<weft_timeline_info_t>(),
    ranks: 0,
    makespan: 0.0,
    bubble_fraction: 0.0,
};

/// `weft_rank_stats_t`; start from [`WEFT_RANK_STATS_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_rank_stats_t {
    /// C field `struct_size` of `weft_rank_stats_t`.
    pub struct_size: usize,
    /// Time in F, B, I, W, REDUCE_GRAD.
    pub busy: f64,
    /// Makespan - busy.
    pub idle: f64,
    /// Most micro-batch activations held at once (F done, backward not).
    pub peak_activations: c_int,
    /// The same in bytes (simulation: from the costs; run: 0).
    pub peak_activation_bytes: f64,
}

/// `WEFT_RANK_STATS_INIT`.
pub const WEFT_RANK_STATS_INIT: weft_rank_stats_t = weft_rank_stats_t {
    struct_size: core::mem::size_of::<weft_rank_stats_t>(),
    busy: 0.0,
    idle: 0.0,
    peak_activations: 0,
    peak_activation_bytes: 0.0,
};

/// `enum weft_timeline_format`.
pub type weft_timeline_format_t = c_int;
/// `WEFT_TIMELINE_SVG`: ranks as rows, actions as boxes labelled with the micro-batch.
pub const WEFT_TIMELINE_SVG: weft_timeline_format_t = 0;
/// `WEFT_TIMELINE_CHROME_TRACE`: JSON for chrome://tracing and Perfetto.
pub const WEFT_TIMELINE_CHROME_TRACE: weft_timeline_format_t = 1;

// ------------------------------------------------------------------ simulation and tuning

/// `weft_pipeline_costs_t`; start from [`WEFT_PIPELINE_COSTS_INIT`]. Arrays have `nstages`
/// entries; null where the header allows it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_pipeline_costs_t {
    /// C field `struct_size` of `weft_pipeline_costs_t`.
    pub struct_size: usize,
    /// C field `nstages` of `weft_pipeline_costs_t`.
    pub nstages: c_int,
    /// C field `forward` of `weft_pipeline_costs_t`.
    pub forward: *const f64,
    /// C field `backward` of `weft_pipeline_costs_t`.
    pub backward: *const f64,
    /// C field `backward_input` of `weft_pipeline_costs_t`.
    pub backward_input: *const f64,
    /// C field `backward_weight` of `weft_pipeline_costs_t`.
    pub backward_weight: *const f64,
    /// C field `activation_bytes` of `weft_pipeline_costs_t`.
    pub activation_bytes: *const f64,
    /// C field `weight_grad_bytes` of `weft_pipeline_costs_t`.
    pub weight_grad_bytes: *const f64,
    /// C field `boundary_bytes` of `weft_pipeline_costs_t`.
    pub boundary_bytes: *const f64,
    /// C field `latency` of `weft_pipeline_costs_t`.
    pub latency: f64,
    /// C field `bandwidth` of `weft_pipeline_costs_t`.
    pub bandwidth: f64,
    /// C field `overhead` of `weft_pipeline_costs_t`.
    pub overhead: f64,
    /// C field `reduce_grad` of `weft_pipeline_costs_t`.
    pub reduce_grad: *const f64,
    /// 0 = the arrays above; a COST_MODEL plugin's id = its per-action times.
    pub cost_model: c_int,
    /// Samples per micro-batch, passed to the cost model (default 1).
    pub microbatch_size: c_int,
}

/// `WEFT_PIPELINE_COSTS_INIT`.
pub const WEFT_PIPELINE_COSTS_INIT: weft_pipeline_costs_t = weft_pipeline_costs_t {
    struct_size: core::mem::size_of::<weft_pipeline_costs_t>(),
    nstages: 0,
    forward: core::ptr::null(),
    backward: core::ptr::null(),
    backward_input: core::ptr::null(),
    backward_weight: core::ptr::null(),
    activation_bytes: core::ptr::null(),
    weight_grad_bytes: core::ptr::null(),
    boundary_bytes: core::ptr::null(),
    latency: 0.0,
    bandwidth: 0.0,
    overhead: 0.0,
    reduce_grad: core::ptr::null(),
    cost_model: 0,
    microbatch_size: 1,
};

/// `weft_tune_config_t`; start from [`WEFT_TUNE_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_tune_config_t {
    /// C field `struct_size` of `weft_tune_config_t`.
    pub struct_size: usize,
    /// C field `ranks` of `weft_tune_config_t`.
    pub ranks: c_int,
    /// C field `layers` of `weft_tune_config_t`.
    pub layers: c_int,
    /// C field `layer_forward` of `weft_tune_config_t`.
    pub layer_forward: *const f64,
    /// C field `layer_backward` of `weft_tune_config_t`.
    pub layer_backward: *const f64,
    /// C field `global_batch` of `weft_tune_config_t`.
    pub global_batch: c_int,
    /// C field `microbatch_overhead` of `weft_tune_config_t`.
    pub microbatch_overhead: f64,
    /// C field `activation_bytes_per_sample` of `weft_tune_config_t`.
    pub activation_bytes_per_sample: f64,
    /// C field `boundary_bytes_per_sample` of `weft_tune_config_t`.
    pub boundary_bytes_per_sample: f64,
    /// C field `latency` of `weft_tune_config_t`.
    pub latency: f64,
    /// C field `bandwidth` of `weft_tune_config_t`.
    pub bandwidth: f64,
    /// C field `memory_cap` of `weft_tune_config_t`.
    pub memory_cap: f64,
    /// C field `static_bytes` of `weft_tune_config_t`.
    pub static_bytes: f64,
    /// C field `kinds` of `weft_tune_config_t`.
    pub kinds: *const weft_schedule_kind_t,
    /// C field `nkinds` of `weft_tune_config_t`.
    pub nkinds: usize,
    /// C field `max_stages_per_rank` of `weft_tune_config_t`.
    pub max_stages_per_rank: c_int,
    /// C field `max_microbatches` of `weft_tune_config_t`.
    pub max_microbatches: c_int,
    /// 0 = the layer tables; a COST_MODEL plugin's id = stage times from the plugin.
    pub cost_model: c_int,
}

/// `WEFT_TUNE_CONFIG_INIT`.
pub const WEFT_TUNE_CONFIG_INIT: weft_tune_config_t = weft_tune_config_t {
    struct_size: core::mem::size_of::<weft_tune_config_t>(),
    ranks: 1,
    layers: 0,
    layer_forward: core::ptr::null(),
    layer_backward: core::ptr::null(),
    global_batch: 1,
    microbatch_overhead: 0.0,
    activation_bytes_per_sample: 0.0,
    boundary_bytes_per_sample: 0.0,
    latency: 0.0,
    bandwidth: 0.0,
    memory_cap: 0.0,
    static_bytes: 0.0,
    kinds: core::ptr::null(),
    nkinds: 0,
    max_stages_per_rank: 0,
    max_microbatches: 0,
    cost_model: 0,
};

/// `weft_tune_candidate_t`: an array element, layout frozen (no struct_size).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct weft_tune_candidate_t {
    /// C field `kind` of `weft_tune_candidate_t`.
    pub kind: weft_schedule_kind_t,
    /// C field `microbatches` of `weft_tune_candidate_t`.
    pub microbatches: c_int,
    /// C field `stages_per_rank` of `weft_tune_candidate_t`.
    pub stages_per_rank: c_int,
    /// C field `microbatch_size` of `weft_tune_candidate_t`.
    pub microbatch_size: c_int,
    /// Simulated makespan.
    pub step_time: f64,
    /// C field `bubble_fraction` of `weft_tune_candidate_t`.
    pub bubble_fraction: f64,
    /// The largest rank's activation peak + static_bytes.
    pub peak_bytes: f64,
    /// Peak_bytes <= memory_cap (or no cap).
    pub fits: c_int,
}

// ------------------------------------------------------------------ the executor

/// Opaque `struct weft_pipeline`.
#[repr(C)]
pub struct weft_pipeline {
    _private: [u8; 0],
}
/// `weft_pipeline_t`: an opaque handle (`*mut weft_pipeline`).
pub type weft_pipeline_t = *mut weft_pipeline;

/// `weft_stage_call_t`: what a stage callback is given (views valid during the call only, but
/// an F input until the backward of the same stage and micro-batch has returned).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_stage_call_t {
    /// C field `kind` of `weft_stage_call_t`.
    pub kind: weft_action_kind_t,
    /// C field `stage` of `weft_stage_call_t`.
    pub stage: c_int,
    /// C field `microbatch` of `weft_stage_call_t`.
    pub microbatch: c_int,
    /// C field `input` of `weft_stage_call_t`.
    pub input: *const weft_tensor_t,
    /// C field `output` of `weft_stage_call_t`.
    pub output: *const weft_tensor_t,
}

/// `weft_stage_fn`: a stage callback (`None` = not given).
pub type weft_stage_fn =
    Option<unsafe extern "C" fn(call: *const weft_stage_call_t, user_data: *mut c_void) -> weft_status_t>;

/// `weft_pipeline_config_t`; start from [`WEFT_PIPELINE_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_pipeline_config_t {
    /// C field `struct_size` of `weft_pipeline_config_t`.
    pub struct_size: usize,
    /// C field `forward` of `weft_pipeline_config_t`.
    pub forward: weft_stage_fn,
    /// C field `backward` of `weft_pipeline_config_t`.
    pub backward: weft_stage_fn,
    /// C field `backward_input` of `weft_pipeline_config_t`.
    pub backward_input: weft_stage_fn,
    /// C field `backward_weight` of `weft_pipeline_config_t`.
    pub backward_weight: weft_stage_fn,
    /// C field `reduce_grad` of `weft_pipeline_config_t`.
    pub reduce_grad: weft_stage_fn,
    /// C field `user_data` of `weft_pipeline_config_t`.
    pub user_data: *mut c_void,
    /// C field `boundaries` of `weft_pipeline_config_t`.
    pub boundaries: *const weft_tensor_t,
    /// C field `nboundaries` of `weft_pipeline_config_t`.
    pub nboundaries: usize,
    /// C field `stream` of `weft_pipeline_config_t`.
    pub stream: *mut c_void,
    /// C field `record` of `weft_pipeline_config_t`.
    pub record: c_int,
}

/// `WEFT_PIPELINE_CONFIG_INIT`.
pub const WEFT_PIPELINE_CONFIG_INIT: weft_pipeline_config_t = weft_pipeline_config_t {
    struct_size: core::mem::size_of::<weft_pipeline_config_t>(),
    forward: None,
    backward: None,
    backward_input: None,
    backward_weight: None,
    reduce_grad: None,
    user_data: core::ptr::null_mut(),
    boundaries: core::ptr::null(),
    nboundaries: 0,
    stream: core::ptr::null_mut(),
    record: 0,
};
