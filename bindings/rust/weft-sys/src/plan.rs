//! Types and constants of `weft/plan.h` (the planner: parallel layouts ranked by predicted step
//! time, and the Amdahl/Gustafson report), in the header's order. The functions are declared in
//! `lib.rs`'s `extern "C"` block with the others.
use core::ffi::{c_char, c_int};

use crate::{weft_schedule_kind_t, WEFT_SCHEDULE_CUSTOM};

/// Opaque `struct weft_plan`.
#[repr(C)]
pub struct weft_plan {
    _private: [u8; 0],
}
/// `weft_plan_t`: an opaque handle (`*mut weft_plan`).
pub type weft_plan_t = *mut weft_plan;

/// `weft_plan_layer_t`: one layer kind of the model; an array element (no struct_size) whose
/// stride the config's `layer_size` gives (104 bytes; the first release's 80 ended at
/// `context_bytes`; new fields are only ever appended). Per-sample quantities are for one
/// sample of the global batch.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_plan_layer_t {
    /// For messages and tables (copied; NULL = `"layer<i>"`).
    pub name: *const c_char,
    /// Identical copies in a row (>= 1).
    pub count: c_int,
    /// 0 = dense; > 0 = an MoE layer of that many experts.
    pub experts: c_int,
    /// Experts per token of an MoE layer.
    pub top_k: c_int,
    /// 1 = Megatron-splittable over tp; 0 = replicated on every tp rank.
    pub tensor_parallel: c_int,
    /// Parameters (elements).
    pub params: f64,
    /// Forward floating-point operations per sample.
    pub forward_flops: f64,
    /// Measured forward seconds per sample (> 0 overrides the flops).
    pub forward_seconds: f64,
    /// Backward seconds per sample (0 = 2 x forward).
    pub backward_seconds: f64,
    /// What the forward keeps until the backward, per sample.
    pub activation_bytes: f64,
    /// The layer's output per sample.
    pub output_bytes: f64,
    /// K/V bytes per sample a context-parallel rank needs from the others.
    pub context_bytes: f64,
    /// Of a layer split over tp (tensor_parallel = 1, or an MoE layer), the share (0..1) of its
    /// forward and backward time that every tp rank runs whole (norms, residual adds, a
    /// projection outside the split); 0 = none.
    pub tp_replicated: f64,
    /// All-reduces over tp per micro-batch in each direction of a splittable dense layer (0 = 2:
    /// a transformer block; 1: an MLP or attention block alone).
    pub tp_allreduces: c_int,
    /// Of an MoE layer's params, those every rank holds whole (router, shared experts): summed
    /// over tp once a step, then reduced over dp x cp as dense ones; 0 for a dense layer.
    pub shared_params: f64,
}

impl Default for weft_plan_layer_t {
    fn default() -> Self {
        weft_plan_layer_t {
            name: core::ptr::null(),
            count: 1,
            experts: 0,
            top_k: 1,
            tensor_parallel: 1,
            params: 0.0,
            forward_flops: 0.0,
            forward_seconds: 0.0,
            backward_seconds: 0.0,
            activation_bytes: 0.0,
            output_bytes: 0.0,
            context_bytes: 0.0,
            tp_replicated: 0.0,
            tp_allreduces: 0,
            shared_params: 0.0,
        }
    }
}

/// `enum weft_plan_collective_kind`: the collectives a cluster may give measured costs for.
pub type weft_plan_collective_kind_t = c_int;
/// `WEFT_PLAN_ALLREDUCE`: a (ring) all-reduce.
pub const WEFT_PLAN_ALLREDUCE: weft_plan_collective_kind_t = 0;
/// `WEFT_PLAN_ALLTOALL`: an all-to-all.
pub const WEFT_PLAN_ALLTOALL: weft_plan_collective_kind_t = 1;

/// `weft_plan_collective_t`: one measured small collective within one host; an array element,
/// layout frozen (no struct_size).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct weft_plan_collective_t {
    /// `WEFT_PLAN_ALLREDUCE` or `WEFT_PLAN_ALLTOALL`.
    pub kind: weft_plan_collective_kind_t,
    /// The group's ranks, all of one host (2..=ranks_per_host).
    pub ranks: c_int,
    /// Seconds one collective took while every rank of the host computed between calls (>= 0).
    pub seconds: f64,
}

/// `weft_plan_cluster_t`; start from [`WEFT_PLAN_CLUSTER_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_plan_cluster_t {
    /// C field `struct_size` of `weft_plan_cluster_t`.
    pub struct_size: usize,
    /// Hosts (>= 1).
    pub hosts: c_int,
    /// Ranks per host (>= 1).
    pub ranks_per_host: c_int,
    /// Bytes a rank may use (> 0).
    pub memory_per_rank: f64,
    /// Sustained floating-point operations per second per rank.
    pub flops_per_rank: f64,
    /// Bytes/s between ranks of one host.
    pub intra_bandwidth: f64,
    /// Seconds per message between ranks of one host.
    pub intra_latency: f64,
    /// Bytes/s between hosts, per rank.
    pub inter_bandwidth: f64,
    /// Seconds per message between hosts.
    pub inter_latency: f64,
    /// Measured small collectives within one host (NULL = none; read during
    /// `weft_plan_create`, not kept).
    pub intra_collectives: *const weft_plan_collective_t,
    /// How many entries `intra_collectives` has.
    pub num_intra_collectives: usize,
}

/// `WEFT_PLAN_CLUSTER_INIT`.
pub const WEFT_PLAN_CLUSTER_INIT: weft_plan_cluster_t = weft_plan_cluster_t {
    struct_size: core::mem::size_of::<weft_plan_cluster_t>(),
    hosts: 1,
    ranks_per_host: 1,
    memory_per_rank: 0.0,
    flops_per_rank: 0.0,
    intra_bandwidth: 0.0,
    intra_latency: 0.0,
    inter_bandwidth: 0.0,
    inter_latency: 0.0,
    intra_collectives: core::ptr::null(),
    num_intra_collectives: 0,
};

/// `weft_plan_layout_t`: one layout and its prediction; start from [`WEFT_PLAN_LAYOUT_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct weft_plan_layout_t {
    /// C field `struct_size` of `weft_plan_layout_t`.
    pub struct_size: usize,
    /// Data-parallel replicas.
    pub dp: c_int,
    /// Tensor-parallel ranks.
    pub tp: c_int,
    /// Pipeline ranks.
    pub pp: c_int,
    /// Expert parallelism over dp x tp (1 = none).
    pub ep: c_int,
    /// Context-parallel ranks.
    pub cp: c_int,
    /// ZeRO stage 0..3.
    pub zero_stage: c_int,
    /// The pipeline schedule (`WEFT_SCHEDULE_CUSTOM` as input: try every generator).
    pub schedule: weft_schedule_kind_t,
    /// Micro-batches per step (0 as input: try every count).
    pub microbatches: c_int,
    /// Stages per pipeline rank (0 as input: every allowed one).
    pub stages_per_rank: c_int,
    /// Nonzero when memory_per_rank is within the cluster's.
    pub fits: c_int,
    /// Predicted step: the pipeline's makespan + the exposed data-parallel time.
    pub step_seconds: f64,
    /// Arithmetic per step on the busiest pipeline rank.
    pub compute_seconds: f64,
    /// Communication on the critical path.
    pub communication_seconds: f64,
    /// The simulator's idle fraction of the pipeline.
    pub bubble_fraction: f64,
    /// The largest rank's bytes (static + activations).
    pub memory_per_rank: f64,
    /// Weights + gradients + optimizer state on the largest rank.
    pub static_bytes: f64,
    /// The simulator's activation peak on the rank with the largest total.
    pub activation_bytes: f64,
    /// Bytes one rank sends per step (the busiest rank).
    pub communication_bytes: f64,
}

/// `WEFT_PLAN_LAYOUT_INIT`.
pub const WEFT_PLAN_LAYOUT_INIT: weft_plan_layout_t = weft_plan_layout_t {
    struct_size: core::mem::size_of::<weft_plan_layout_t>(),
    dp: 1,
    tp: 1,
    pp: 1,
    ep: 1,
    cp: 1,
    zero_stage: 0,
    schedule: WEFT_SCHEDULE_CUSTOM,
    microbatches: 0,
    stages_per_rank: 0,
    fits: 0,
    step_seconds: 0.0,
    compute_seconds: 0.0,
    communication_seconds: 0.0,
    bubble_fraction: 0.0,
    memory_per_rank: 0.0,
    static_bytes: 0.0,
    activation_bytes: 0.0,
    communication_bytes: 0.0,
};

/// `weft_plan_config_t`: what to plan; start from [`WEFT_PLAN_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_plan_config_t {
    /// C field `struct_size` of `weft_plan_config_t`.
    pub struct_size: usize,
    /// The model's layer kinds, in order.
    pub layers: *const weft_plan_layer_t,
    /// How many entries `layers` has.
    pub num_layers: usize,
    /// The machines.
    pub cluster: *const weft_plan_cluster_t,
    /// Samples per step.
    pub global_batch: c_int,
    /// Ranks to use (0 = all of the cluster's).
    pub ranks: c_int,
    /// Bytes per parameter of the weights (0 = 2).
    pub weight_bytes: f64,
    /// Bytes per parameter of the gradients (0 = 2).
    pub grad_bytes: f64,
    /// Bytes per parameter of the optimizer state (0 = 12).
    pub optimizer_bytes: f64,
    /// Seconds added to every compute action.
    pub microbatch_overhead: f64,
    /// Layouts kept, best first (0 = 10).
    pub top: c_int,
    /// Nonzero = layouts over the memory cap are kept too.
    pub include_infeasible: c_int,
    /// The largest pipeline factor tried (0 = no limit).
    pub max_pp: c_int,
    /// The largest tensor-parallel factor tried (0 = no limit).
    pub max_tp: c_int,
    /// The largest context-parallel factor tried (0 = the header's rule).
    pub max_cp: c_int,
    /// Nonzero = tp may exceed ranks_per_host.
    pub tp_across_hosts: c_int,
    /// The schedules tried (NULL = every built-in generator).
    pub kinds: *const weft_schedule_kind_t,
    /// How many entries `kinds` has.
    pub nkinds: usize,
    /// The largest micro-batch count tried (0 = the replica's batch).
    pub max_microbatches: c_int,
    /// NULL = search; else predict this one layout.
    pub layout: *const weft_plan_layout_t,
    /// Nonzero = compute the scaling curves during creation.
    pub scaling: c_int,
    /// The stride of `layers` in bytes: `size_of::<weft_plan_layer_t>()` (104) from the INIT
    /// constant; 80 or 0 = the first release's layout; any other size is refused.
    pub layer_size: usize,
    /// Bytes per parameter of an all-reduce of the gradients over their replicas before the DP
    /// reduction (a float64 sum for reproducibility: 8); 0 = none (load: the model file's).
    pub grad_allreduce_bytes: f64,
}

/// `WEFT_PLAN_CONFIG_INIT`.
pub const WEFT_PLAN_CONFIG_INIT: weft_plan_config_t = weft_plan_config_t {
    struct_size: core::mem::size_of::<weft_plan_config_t>(),
    layers: core::ptr::null(),
    num_layers: 0,
    cluster: core::ptr::null(),
    global_batch: 0,
    ranks: 0,
    weight_bytes: 0.0,
    grad_bytes: 0.0,
    optimizer_bytes: 0.0,
    microbatch_overhead: 0.0,
    top: 0,
    include_infeasible: 0,
    max_pp: 0,
    max_tp: 0,
    max_cp: 0,
    tp_across_hosts: 0,
    kinds: core::ptr::null(),
    nkinds: 0,
    max_microbatches: 0,
    layout: core::ptr::null(),
    scaling: 0,
    layer_size: core::mem::size_of::<weft_plan_layer_t>(),
    grad_allreduce_bytes: 0.0,
};

/// `weft_plan_info_t`; start from [`WEFT_PLAN_INFO_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_plan_info_t {
    /// C field `struct_size` of `weft_plan_info_t`.
    pub struct_size: usize,
    /// The ranks planned for.
    pub ranks: c_int,
    /// Samples per step.
    pub global_batch: c_int,
    /// Layouts kept.
    pub count: usize,
    /// Layouts predicted in all.
    pub searched: usize,
    /// Of them, those that fit.
    pub feasible: usize,
}

/// `WEFT_PLAN_INFO_INIT`.
pub const WEFT_PLAN_INFO_INIT: weft_plan_info_t = weft_plan_info_t {
    struct_size: core::mem::size_of::<weft_plan_info_t>(),
    ranks: 0,
    global_batch: 0,
    count: 0,
    searched: 0,
    feasible: 0,
};

/// `weft_plan_scaling_t`: what parallelism buys at the plan's ranks; start from
/// [`WEFT_PLAN_SCALING_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_plan_scaling_t {
    /// C field `struct_size` of `weft_plan_scaling_t`.
    pub struct_size: usize,
    /// N, the plan's ranks.
    pub ranks: c_int,
    /// The predicted step on one rank.
    pub one_rank_seconds: f64,
    /// The best layout's step.
    pub step_seconds: f64,
    /// one_rank_seconds / step_seconds.
    pub speedup: f64,
    /// speedup / N.
    pub efficiency: f64,
    /// Amdahl's serial fraction solved from the speedup.
    pub serial_fraction: f64,
    /// N - s (N - 1).
    pub gustafson_speedup: f64,
}

/// `WEFT_PLAN_SCALING_INIT`.
pub const WEFT_PLAN_SCALING_INIT: weft_plan_scaling_t = weft_plan_scaling_t {
    struct_size: core::mem::size_of::<weft_plan_scaling_t>(),
    ranks: 0,
    one_rank_seconds: 0.0,
    step_seconds: 0.0,
    speedup: 0.0,
    efficiency: 0.0,
    serial_fraction: 0.0,
    gustafson_speedup: 0.0,
};

/// `weft_plan_scaling_point_t`: one point of the scaling curves; an array element, layout frozen.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct weft_plan_scaling_point_t {
    /// n ranks.
    pub ranks: c_int,
    /// The weak-scaling batch at n ranks.
    pub weak_batch: c_int,
    /// Nonzero when the best layout at n ranks is within the memory cap.
    pub fits: c_int,
    /// The step at the plan's global batch on n ranks.
    pub strong_seconds: f64,
    /// One-rank step / strong_seconds.
    pub strong_speedup: f64,
    /// 1 / (s + (1 - s) / n).
    pub amdahl_speedup: f64,
    /// The step at weak_batch on n ranks.
    pub weak_seconds: f64,
    /// Samples per second relative to one rank at weak_batch(1).
    pub weak_speedup: f64,
    /// n - s (n - 1).
    pub gustafson_speedup: f64,
}

/// `enum weft_plan_format_kind`.
pub type weft_plan_format_kind_t = c_int;
/// `WEFT_PLAN_FORMAT_TABLE`: the kept layouts as a text table, best first.
pub const WEFT_PLAN_FORMAT_TABLE: weft_plan_format_kind_t = 0;
/// `WEFT_PLAN_FORMAT_REPORT`: the Amdahl/Gustafson report with the strong and weak curves.
pub const WEFT_PLAN_FORMAT_REPORT: weft_plan_format_kind_t = 1;
/// `WEFT_PLAN_FORMAT_JSON`: the plan as JSON.
pub const WEFT_PLAN_FORMAT_JSON: weft_plan_format_kind_t = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn plan_layouts_match_the_header() {
        // sizeof/offsetof of capi/include/weft/plan.h on LP64, measured with the C compiler.
        assert_eq!(size_of::<weft_plan_layer_t>(), 104);
        assert_eq!(offset_of!(weft_plan_layer_t, params), 24);
        assert_eq!(offset_of!(weft_plan_layer_t, context_bytes), 72);
        assert_eq!(offset_of!(weft_plan_layer_t, tp_replicated), 80);
        assert_eq!(offset_of!(weft_plan_layer_t, tp_allreduces), 88);
        assert_eq!(offset_of!(weft_plan_layer_t, shared_params), 96);
        assert_eq!(size_of::<weft_plan_collective_t>(), 16);
        assert_eq!(offset_of!(weft_plan_collective_t, ranks), 4);
        assert_eq!(offset_of!(weft_plan_collective_t, seconds), 8);
        assert_eq!(size_of::<weft_plan_cluster_t>(), 80);
        assert_eq!(offset_of!(weft_plan_cluster_t, memory_per_rank), 16);
        assert_eq!(offset_of!(weft_plan_cluster_t, inter_latency), 56);
        assert_eq!(offset_of!(weft_plan_cluster_t, intra_collectives), 64);
        assert_eq!(offset_of!(weft_plan_cluster_t, num_intra_collectives), 72);
        assert_eq!(WEFT_PLAN_CLUSTER_INIT.struct_size, 80);
        assert_eq!(size_of::<weft_plan_layout_t>(), 112);
        assert_eq!(offset_of!(weft_plan_layout_t, schedule), 32);
        assert_eq!(offset_of!(weft_plan_layout_t, fits), 44);
        assert_eq!(offset_of!(weft_plan_layout_t, step_seconds), 48);
        assert_eq!(offset_of!(weft_plan_layout_t, communication_bytes), 104);
        assert_eq!(size_of::<weft_plan_config_t>(), 152);
        assert_eq!(offset_of!(weft_plan_config_t, global_batch), 32);
        assert_eq!(offset_of!(weft_plan_config_t, top), 72);
        assert_eq!(offset_of!(weft_plan_config_t, kinds), 96);
        assert_eq!(offset_of!(weft_plan_config_t, max_microbatches), 112);
        assert_eq!(offset_of!(weft_plan_config_t, layout), 120);
        assert_eq!(offset_of!(weft_plan_config_t, scaling), 128);
        assert_eq!(offset_of!(weft_plan_config_t, layer_size), 136);
        assert_eq!(offset_of!(weft_plan_config_t, grad_allreduce_bytes), 144);
        assert_eq!(size_of::<weft_plan_info_t>(), 40);
        assert_eq!(offset_of!(weft_plan_info_t, count), 16);
        assert_eq!(offset_of!(weft_plan_info_t, feasible), 32);
        assert_eq!(size_of::<weft_plan_scaling_t>(), 64);
        assert_eq!(offset_of!(weft_plan_scaling_t, one_rank_seconds), 16);
        assert_eq!(offset_of!(weft_plan_scaling_t, gustafson_speedup), 56);
        assert_eq!(size_of::<weft_plan_scaling_point_t>(), 64);
        assert_eq!(offset_of!(weft_plan_scaling_point_t, strong_seconds), 16);
        assert_eq!(offset_of!(weft_plan_scaling_point_t, gustafson_speedup), 56);
        assert_eq!(WEFT_PLAN_CONFIG_INIT.struct_size, 152);
        assert_eq!(WEFT_PLAN_CONFIG_INIT.layer_size, 104);
        assert_eq!(WEFT_PLAN_LAYOUT_INIT.schedule, WEFT_SCHEDULE_CUSTOM);
    }
}
