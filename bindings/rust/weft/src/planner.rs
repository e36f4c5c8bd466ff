//! The planner (`weft/plan.h`): from a model ([`PlanLayer`]s), a cluster ([`PlanCluster`]) and a
//! global batch, the parallel layouts ([`PlanLayout`]: dp, tp, pp, ep, cp, ZeRO stage, schedule,
//! micro-batches) ranked by predicted step time under the memory cap, and what parallelism buys
//! ([`PlanScaling`], [`ScalingPoint`]: Amdahl and Gustafson). A [`LayoutPlan`] is immutable and
//! communicates nothing; plan.h states the cost model and the text file formats.
//!
//! ```no_run
//! use weft::{LayoutPlan, PlanCluster, PlanConfig, PlanLayer};
//! let layers = vec![PlanLayer { name: "block".into(), count: 4, params: 1e6, forward_seconds: 1e-4,
//!                               activation_bytes: 4096.0, output_bytes: 1024.0, ..Default::default() }];
//! let cluster = PlanCluster { ranks_per_host: 8, memory_per_rank: 16e9, intra_bandwidth: 1e10,
//!                             ..Default::default() };
//! let plan = LayoutPlan::create(&PlanConfig { global_batch: 64, ..PlanConfig::new(&layers, &cluster) })?;
//! println!("{}", plan.table()?);
//! # Ok::<(), weft::Error>(())
//! ```
//! Named `LayoutPlan` (not `Plan`) because [`plan`](crate::plan) is the redistribution plan of
//! sharded tensors.
use std::ffi::{c_char, CString};
use std::path::Path;
use std::ptr;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::schedule::{path_c, ScheduleKind};
use crate::types::to_c_int;

/// One layer kind of the model (`weft_plan_layer_t`); per-sample quantities are for one sample
/// of the global batch. The default is a dense, tensor-parallel layer of one copy and no cost.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanLayer {
    /// For messages and tables ("" = `"layer<i>"`).
    pub name: String,
    /// Identical copies in a row (>= 1).
    pub count: usize,
    /// 0 = dense; > 0 = an MoE layer of that many experts (params counts all of them).
    pub experts: usize,
    /// Experts per token of an MoE layer.
    pub top_k: usize,
    /// Megatron-splittable over tp (false: replicated on every tp rank).
    pub tensor_parallel: bool,
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
    /// The layer's output per sample (pipeline boundary, TP reduction, EP token size).
    pub output_bytes: f64,
    /// K/V bytes per sample a context-parallel rank needs from the others.
    pub context_bytes: f64,
    /// Of a layer split over tp (tensor_parallel, or an MoE layer), the share (0..1) of its
    /// forward and backward time that every tp rank runs whole (norms, residual adds, a
    /// projection outside the split); 0 = none.
    pub tp_replicated: f64,
    /// All-reduces over tp per micro-batch in each direction of a splittable dense layer (0 = 2:
    /// a transformer block; 1: an MLP or attention block alone).
    pub tp_allreduces: usize,
    /// Of an MoE layer's params, those every rank holds whole (the router, shared experts). Its
    /// tokens are split over tp, so their gradients are all-reduced over tp once a step, then
    /// reduced over dp as a dense layer's; the rest are the experts, sharded over ep.
    pub shared_params: f64,
}

impl Default for PlanLayer {
    fn default() -> Self {
        PlanLayer {
            name: String::new(),
            count: 1,
            experts: 0,
            top_k: 1,
            tensor_parallel: true,
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

/// `weft_plan_collective_kind_t`: the collectives a cluster may give measured costs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanCollectiveKind {
    /// `WEFT_PLAN_ALLREDUCE`: a (ring) all-reduce, 2 (n - 1) steps over n ranks.
    AllReduce,
    /// `WEFT_PLAN_ALLTOALL`: an all-to-all, n - 1 steps over n ranks.
    AllToAll,
}

impl PlanCollectiveKind {
    /// The C value (`weft_plan_collective_kind_t`).
    pub fn raw(self) -> sys::weft_plan_collective_kind_t {
        match self {
            PlanCollectiveKind::AllReduce => sys::WEFT_PLAN_ALLREDUCE,
            PlanCollectiveKind::AllToAll => sys::WEFT_PLAN_ALLTOALL,
        }
    }
}

/// One measured small collective within one host (`weft_plan_collective_t`): one collective of
/// `kind` over `ranks` ranks of one host took `seconds` while every rank of the host computed
/// between calls (weft-bench --cluster-file measures them). Within a host it replaces that
/// kind's latency term (plan.h's cost model: the entry of the group's size, else the per-step
/// cost of the nearest smaller size, else of the nearest larger).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanCollective {
    /// All-reduce or all-to-all.
    pub kind: PlanCollectiveKind,
    /// The group's ranks (2..=ranks_per_host; each kind and size at most once).
    pub ranks: usize,
    /// Seconds one collective took (finite, >= 0).
    pub seconds: f64,
}

impl PlanCollective {
    /// A measured collective of `kind` over `ranks` ranks that took `seconds`.
    pub fn new(kind: PlanCollectiveKind, ranks: usize, seconds: f64) -> PlanCollective {
        PlanCollective { kind, ranks, seconds }
    }
}

/// The machines (`weft_plan_cluster_t`); the default is `WEFT_PLAN_CLUSTER_INIT` (one host of one
/// rank, no memory or bandwidth, no measured collectives: set those).
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCluster {
    /// Hosts (>= 1).
    pub hosts: usize,
    /// Ranks per host (>= 1).
    pub ranks_per_host: usize,
    /// Bytes a rank may use (> 0).
    pub memory_per_rank: f64,
    /// Sustained floating-point operations per second per rank.
    pub flops_per_rank: f64,
    /// Bytes/s between ranks of one host.
    pub intra_bandwidth: f64,
    /// Seconds per message between ranks of one host.
    pub intra_latency: f64,
    /// Bytes/s between hosts, per rank (needed when hosts > 1).
    pub inter_bandwidth: f64,
    /// Seconds per message between hosts.
    pub inter_latency: f64,
    /// Measured small collectives within one host (empty = none: every collective's latency
    /// term from `intra_latency`).
    pub intra_collectives: Vec<PlanCollective>,
}

impl Default for PlanCluster {
    fn default() -> Self {
        let c = sys::WEFT_PLAN_CLUSTER_INIT;
        PlanCluster {
            hosts: c.hosts as usize,
            ranks_per_host: c.ranks_per_host as usize,
            memory_per_rank: c.memory_per_rank,
            flops_per_rank: c.flops_per_rank,
            intra_bandwidth: c.intra_bandwidth,
            intra_latency: c.intra_latency,
            inter_bandwidth: c.inter_bandwidth,
            inter_latency: c.inter_latency,
            intra_collectives: Vec::new(),
        }
    }
}

impl PlanCluster {
    /// The C cluster and the `intra_collectives` array it points at: keep both alive (and the
    /// array unmoved: its heap buffer is what the cluster points at) while the cluster is used.
    fn raw(&self) -> Result<(sys::weft_plan_cluster_t, Vec<sys::weft_plan_collective_t>)> {
        let mut c = sys::WEFT_PLAN_CLUSTER_INIT;
        c.hosts = to_c_int(self.hosts, "PlanCluster::hosts")?;
        c.ranks_per_host = to_c_int(self.ranks_per_host, "PlanCluster::ranks_per_host")?;
        c.memory_per_rank = self.memory_per_rank;
        c.flops_per_rank = self.flops_per_rank;
        c.intra_bandwidth = self.intra_bandwidth;
        c.intra_latency = self.intra_latency;
        c.inter_bandwidth = self.inter_bandwidth;
        c.inter_latency = self.inter_latency;
        let mut measured = Vec::with_capacity(self.intra_collectives.len());
        for (i, m) in self.intra_collectives.iter().enumerate() {
            measured.push(sys::weft_plan_collective_t {
                kind: m.kind.raw(),
                ranks: to_c_int(m.ranks, &format!("PlanCluster::intra_collectives[{i}].ranks"))?,
                seconds: m.seconds,
            });
        }
        if !measured.is_empty() {
            c.intra_collectives = measured.as_ptr();
            c.num_intra_collectives = measured.len();
        }
        Ok((c, measured))
    }
}

/// One layout and its prediction (`weft_plan_layout_t`). As [`PlanConfig::layout`] only the
/// layout fields count (schedule [`ScheduleKind::Custom`] = try every generator, microbatches
/// 0 = every count, stages_per_rank 0 = every allowed one); a plan's layouts have every field
/// set. The default is `WEFT_PLAN_LAYOUT_INIT` (one rank, everything else searched).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanLayout {
    /// Data-parallel replicas.
    pub dp: usize,
    /// Tensor-parallel ranks.
    pub tp: usize,
    /// Pipeline ranks.
    pub pp: usize,
    /// Expert parallelism over dp x tp (1 = none).
    pub ep: usize,
    /// Context-parallel ranks.
    pub cp: usize,
    /// ZeRO stage 0..3.
    pub zero_stage: usize,
    /// The pipeline schedule (`None` for a kind this binding does not know).
    pub schedule: Option<ScheduleKind>,
    /// Micro-batches per step.
    pub microbatches: usize,
    /// Stages per pipeline rank.
    pub stages_per_rank: usize,
    /// memory_per_rank is within the cluster's.
    pub fits: bool,
    /// Predicted step: the pipeline's makespan + the exposed data-parallel time.
    pub step_seconds: f64,
    /// Arithmetic per step on the busiest pipeline rank.
    pub compute_seconds: f64,
    /// Communication on the critical path (TP, EP, CP, ZeRO-3 inside the stages, then DP).
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

impl Default for PlanLayout {
    fn default() -> Self {
        PlanLayout::from_raw(&sys::WEFT_PLAN_LAYOUT_INIT)
    }
}

impl PlanLayout {
    fn from_raw(r: &sys::weft_plan_layout_t) -> PlanLayout {
        let u = |v: std::ffi::c_int| v.max(0) as usize;
        PlanLayout {
            dp: u(r.dp),
            tp: u(r.tp),
            pp: u(r.pp),
            ep: u(r.ep),
            cp: u(r.cp),
            zero_stage: u(r.zero_stage),
            schedule: ScheduleKind::from_raw(r.schedule),
            microbatches: u(r.microbatches),
            stages_per_rank: u(r.stages_per_rank),
            fits: r.fits != 0,
            step_seconds: r.step_seconds,
            compute_seconds: r.compute_seconds,
            communication_seconds: r.communication_seconds,
            bubble_fraction: r.bubble_fraction,
            memory_per_rank: r.memory_per_rank,
            static_bytes: r.static_bytes,
            activation_bytes: r.activation_bytes,
            communication_bytes: r.communication_bytes,
        }
    }

    fn raw(&self) -> Result<sys::weft_plan_layout_t> {
        let mut c = sys::WEFT_PLAN_LAYOUT_INIT;
        c.dp = to_c_int(self.dp, "PlanLayout::dp")?;
        c.tp = to_c_int(self.tp, "PlanLayout::tp")?;
        c.pp = to_c_int(self.pp, "PlanLayout::pp")?;
        c.ep = to_c_int(self.ep, "PlanLayout::ep")?;
        c.cp = to_c_int(self.cp, "PlanLayout::cp")?;
        c.zero_stage = to_c_int(self.zero_stage, "PlanLayout::zero_stage")?;
        c.schedule = self.schedule.unwrap_or(ScheduleKind::Custom).raw();
        c.microbatches = to_c_int(self.microbatches, "PlanLayout::microbatches")?;
        c.stages_per_rank = to_c_int(self.stages_per_rank, "PlanLayout::stages_per_rank")?;
        Ok(c)
    }
}

/// What to plan (`weft_plan_config_t`). [`PlanConfig::new`] takes the model and the cluster;
/// every other field's zero means the header's default.
#[derive(Debug, Clone, Default)]
pub struct PlanConfig<'a> {
    /// The model, in order (ignored by [`LayoutPlan::load`]).
    pub layers: &'a [PlanLayer],
    /// The machines (required by [`LayoutPlan::create`]; ignored by [`LayoutPlan::load`]).
    pub cluster: Option<&'a PlanCluster>,
    /// Samples per step ([`LayoutPlan::load`]: 0 = the model file's train line).
    pub global_batch: usize,
    /// Ranks to use (0 = all of the cluster's).
    pub ranks: usize,
    /// Bytes per parameter of the weights (0 = the file's, else 2).
    pub weight_bytes: f64,
    /// Bytes per parameter of the gradients (0 = the file's, else 2).
    pub grad_bytes: f64,
    /// Bytes per parameter of the optimizer state (0 = the file's, else 12).
    pub optimizer_bytes: f64,
    /// Seconds added to every compute action.
    pub microbatch_overhead: f64,
    /// Layouts kept, best first (0 = 10).
    pub top: usize,
    /// Keep layouts over the memory cap too (after every feasible one).
    pub include_infeasible: bool,
    /// The largest pipeline factor tried (0 = no limit).
    pub max_pp: usize,
    /// The largest tensor-parallel factor tried (0 = no limit).
    pub max_tp: usize,
    /// The largest context-parallel factor tried (0 = the header's rule).
    pub max_cp: usize,
    /// tp may exceed ranks_per_host.
    pub tp_across_hosts: bool,
    /// The schedules tried (`None` = every built-in generator).
    pub kinds: Option<Vec<ScheduleKind>>,
    /// The largest micro-batch count tried (0 = the replica's batch).
    pub max_microbatches: usize,
    /// `None` = search every layout; `Some` = predict this one only.
    pub layout: Option<PlanLayout>,
    /// Compute the scaling curves while creating the plan.
    pub scaling: bool,
    /// Bytes per parameter of an all-reduce of the gradients over their replicas before the DP
    /// reduction (a float64 sum for reproducibility: 8); 0 = none ([`LayoutPlan::load`]: the
    /// model file's).
    pub grad_allreduce_bytes: f64,
}

impl<'a> PlanConfig<'a> {
    /// A config for `layers` on `cluster`, everything else the header's default.
    pub fn new(layers: &'a [PlanLayer], cluster: &'a PlanCluster) -> PlanConfig<'a> {
        PlanConfig { layers, cluster: Some(cluster), ..Default::default() }
    }
}

/// The C config and everything it points at, alive together.
struct RawConfig {
    config: sys::weft_plan_config_t,
    _names: Vec<CString>,
    _layers: Vec<sys::weft_plan_layer_t>,
    _cluster: Box<sys::weft_plan_cluster_t>,
    _collectives: Vec<sys::weft_plan_collective_t>,
    _kinds: Vec<sys::weft_schedule_kind_t>,
    _layout: Box<sys::weft_plan_layout_t>,
}

impl RawConfig {
    fn new(cfg: &PlanConfig<'_>) -> Result<RawConfig> {
        let mut names = Vec::with_capacity(cfg.layers.len());
        let mut layers = Vec::with_capacity(cfg.layers.len());
        for (i, l) in cfg.layers.iter().enumerate() {
            let name = CString::new(l.name.as_str())
                .map_err(|_| Error::invalid(format!("PlanLayer {i}: name {:?} contains a NUL byte", l.name)))?;
            let what = |f: &str| format!("PlanLayer {i} ({}): {f}", l.name);
            layers.push(sys::weft_plan_layer_t {
                name: if l.name.is_empty() { ptr::null() } else { name.as_ptr() },
                count: to_c_int(l.count, &what("count"))?,
                experts: to_c_int(l.experts, &what("experts"))?,
                top_k: to_c_int(l.top_k, &what("top_k"))?,
                tensor_parallel: l.tensor_parallel as std::ffi::c_int,
                params: l.params,
                forward_flops: l.forward_flops,
                forward_seconds: l.forward_seconds,
                backward_seconds: l.backward_seconds,
                activation_bytes: l.activation_bytes,
                output_bytes: l.output_bytes,
                context_bytes: l.context_bytes,
                tp_replicated: l.tp_replicated,
                tp_allreduces: to_c_int(l.tp_allreduces, &what("tp_allreduces"))?,
                shared_params: l.shared_params,
            });
            names.push(name); // moving a CString keeps its heap buffer, so the pointer stays valid
        }
        let (cluster, collectives) = match cfg.cluster {
            Some(c) => c.raw()?,
            None => (sys::WEFT_PLAN_CLUSTER_INIT, Vec::new()),
        };
        let cluster = Box::new(cluster);
        let kinds: Vec<_> = cfg.kinds.iter().flatten().map(|k| k.raw()).collect();
        let layout = Box::new(match &cfg.layout {
            Some(l) => l.raw()?,
            None => sys::WEFT_PLAN_LAYOUT_INIT,
        });
        let mut c = sys::WEFT_PLAN_CONFIG_INIT;
        c.layers = if layers.is_empty() { ptr::null() } else { layers.as_ptr() };
        c.num_layers = layers.len();
        c.layer_size = std::mem::size_of::<sys::weft_plan_layer_t>(); // the stride of `layers`: 104
        c.cluster = if cfg.cluster.is_some() { &*cluster } else { ptr::null() };
        c.global_batch = to_c_int(cfg.global_batch, "PlanConfig::global_batch")?;
        c.ranks = to_c_int(cfg.ranks, "PlanConfig::ranks")?;
        c.weight_bytes = cfg.weight_bytes;
        c.grad_bytes = cfg.grad_bytes;
        c.optimizer_bytes = cfg.optimizer_bytes;
        c.microbatch_overhead = cfg.microbatch_overhead;
        c.grad_allreduce_bytes = cfg.grad_allreduce_bytes;
        c.top = to_c_int(cfg.top, "PlanConfig::top")?;
        c.include_infeasible = cfg.include_infeasible as std::ffi::c_int;
        c.max_pp = to_c_int(cfg.max_pp, "PlanConfig::max_pp")?;
        c.max_tp = to_c_int(cfg.max_tp, "PlanConfig::max_tp")?;
        c.max_cp = to_c_int(cfg.max_cp, "PlanConfig::max_cp")?;
        c.tp_across_hosts = cfg.tp_across_hosts as std::ffi::c_int;
        if cfg.kinds.is_some() {
            c.kinds = if kinds.is_empty() { ptr::null() } else { kinds.as_ptr() };
            c.nkinds = kinds.len();
        }
        c.max_microbatches = to_c_int(cfg.max_microbatches, "PlanConfig::max_microbatches")?;
        c.layout = if cfg.layout.is_some() { &*layout } else { ptr::null() };
        c.scaling = cfg.scaling as std::ffi::c_int;
        Ok(RawConfig {
            config: c,
            _names: names,
            _layers: layers,
            _cluster: cluster,
            _collectives: collectives,
            _kinds: kinds,
            _layout: layout,
        })
    }
}

/// `weft_plan_info_t`: what a plan holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanInfo {
    /// The ranks planned for.
    pub ranks: usize,
    /// Samples per step.
    pub global_batch: usize,
    /// Layouts kept ([`LayoutPlan::layout`]'s 0..count).
    pub count: usize,
    /// Layouts predicted in all.
    pub searched: usize,
    /// Of them, those that fit.
    pub feasible: usize,
}

/// `weft_plan_scaling_t`: what parallelism buys at the plan's N ranks (from the best layout).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanScaling {
    /// N, the plan's ranks.
    pub ranks: usize,
    /// The predicted step on one rank (the memory cap ignored).
    pub one_rank_seconds: f64,
    /// The best layout's step.
    pub step_seconds: f64,
    /// one_rank_seconds / step_seconds.
    pub speedup: f64,
    /// speedup / N.
    pub efficiency: f64,
    /// Amdahl's s = (1 / speedup - 1 / N) / (1 - 1 / N) (0 when N = 1).
    pub serial_fraction: f64,
    /// Gustafson's scaled speedup N - s (N - 1).
    pub gustafson_speedup: f64,
}

/// `weft_plan_scaling_point_t`: one point of the strong and weak scaling curves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalingPoint {
    /// n ranks.
    pub ranks: usize,
    /// The weak-scaling batch: max(1, round(global_batch x n / N)).
    pub weak_batch: usize,
    /// The best layout at n ranks is within the memory cap.
    pub fits: bool,
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

/// `weft_plan_format_kind_t`: what [`LayoutPlan::format`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PlanFormat {
    /// The kept layouts as a text table, best first.
    #[default]
    Table,
    /// The Amdahl/Gustafson report with the strong and weak curves.
    Report,
    /// The plan as JSON (plan.h lists the keys).
    Json,
}

impl PlanFormat {
    /// The C value (`weft_plan_format_kind_t`).
    pub fn raw(self) -> sys::weft_plan_format_kind_t {
        match self {
            PlanFormat::Table => sys::WEFT_PLAN_FORMAT_TABLE,
            PlanFormat::Report => sys::WEFT_PLAN_FORMAT_REPORT,
            PlanFormat::Json => sys::WEFT_PLAN_FORMAT_JSON,
        }
    }
}

/// A plan (`weft_plan_t`): the ranked layouts; dropped = destroyed. Immutable, so it may be
/// shared between threads.
#[derive(Debug)]
pub struct LayoutPlan {
    raw: sys::weft_plan_t,
}

// SAFETY: plan.h: a plan is immutable after creation and may be read from any number of threads
// (weft_plan_scaling guards the curves it computes lazily).
unsafe impl Send for LayoutPlan {}
// SAFETY: as above.
unsafe impl Sync for LayoutPlan {}

impl LayoutPlan {
    /// `weft_plan_create`: ranks the layouts (or predicts `config.layout` alone).
    pub fn create(config: &PlanConfig<'_>) -> Result<LayoutPlan> {
        let c = RawConfig::new(config)?;
        let mut raw = ptr::null_mut();
        // SAFETY: c.config and what it points at live for the call.
        check(unsafe { sys::weft_plan_create(&c.config, &mut raw) })?;
        Ok(LayoutPlan { raw })
    }

    /// `weft_plan_load`: the model and the cluster from plan.h's text files; the nonzero fields
    /// of `config` (its layers and cluster are ignored) override the files' values.
    pub fn load(model: &Path, cluster: &Path, config: Option<&PlanConfig<'_>>) -> Result<LayoutPlan> {
        let (m, cl) = (path_c(model)?, path_c(cluster)?);
        let c = config.map(RawConfig::new).transpose()?;
        let cp = c.as_ref().map_or(ptr::null(), |c| &c.config as *const _);
        let mut raw = ptr::null_mut();
        // SAFETY: NUL-terminated paths; cp is NULL or a config alive for the call.
        check(unsafe { sys::weft_plan_load(m.as_ptr(), cl.as_ptr(), cp, &mut raw) })?;
        Ok(LayoutPlan { raw })
    }

    /// `weft_plan_info`.
    pub fn info(&self) -> Result<PlanInfo> {
        let mut i = sys::WEFT_PLAN_INFO_INIT;
        // SAFETY: a live plan and an out-struct with its struct_size.
        check(unsafe { sys::weft_plan_info(self.raw, &mut i) })?;
        Ok(PlanInfo {
            ranks: i.ranks.max(0) as usize,
            global_batch: i.global_batch.max(0) as usize,
            count: i.count,
            searched: i.searched,
            feasible: i.feasible,
        })
    }

    /// `weft_plan_layout`: the index-th kept layout, best first.
    pub fn layout(&self, index: usize) -> Result<PlanLayout> {
        let mut l = sys::WEFT_PLAN_LAYOUT_INIT;
        // SAFETY: a live plan and an out-struct with its struct_size.
        check(unsafe { sys::weft_plan_layout(self.raw, index, &mut l) })?;
        Ok(PlanLayout::from_raw(&l))
    }

    /// Every kept layout, best first.
    pub fn layouts(&self) -> Result<Vec<PlanLayout>> {
        (0..self.info()?.count).map(|i| self.layout(i)).collect()
    }

    /// The fastest layout that fits (or the predicted one), `None` when none was kept.
    pub fn best(&self) -> Result<Option<PlanLayout>> {
        if self.info()?.count == 0 {
            return Ok(None);
        }
        self.layout(0).map(Some)
    }

    /// `weft_plan_scaling`: the Amdahl/Gustafson summary and the scaling curve (computed on the
    /// first call unless [`PlanConfig::scaling`] was set).
    pub fn scaling(&self) -> Result<(PlanScaling, Vec<ScalingPoint>)> {
        let mut s = sys::WEFT_PLAN_SCALING_INIT;
        let mut count = 0usize;
        // SAFETY: points NULL asks for the count.
        check(unsafe { sys::weft_plan_scaling(self.raw, &mut s, ptr::null_mut(), 0, &mut count) })?;
        let mut raw = vec![sys::weft_plan_scaling_point_t::default(); count];
        // SAFETY: raw has room for `count` points.
        check(unsafe { sys::weft_plan_scaling(self.raw, &mut s, raw.as_mut_ptr(), raw.len(), &mut count) })?;
        raw.truncate(count);
        let summary = PlanScaling {
            ranks: s.ranks.max(0) as usize,
            one_rank_seconds: s.one_rank_seconds,
            step_seconds: s.step_seconds,
            speedup: s.speedup,
            efficiency: s.efficiency,
            serial_fraction: s.serial_fraction,
            gustafson_speedup: s.gustafson_speedup,
        };
        let points = raw
            .iter()
            .map(|p| ScalingPoint {
                ranks: p.ranks.max(0) as usize,
                weak_batch: p.weak_batch.max(0) as usize,
                fits: p.fits != 0,
                strong_seconds: p.strong_seconds,
                strong_speedup: p.strong_speedup,
                amdahl_speedup: p.amdahl_speedup,
                weak_seconds: p.weak_seconds,
                weak_speedup: p.weak_speedup,
                gustafson_speedup: p.gustafson_speedup,
            })
            .collect();
        Ok((summary, points))
    }

    /// `weft_plan_format`: the plan as text.
    pub fn format(&self, what: PlanFormat) -> Result<String> {
        let mut len = 0usize;
        // SAFETY: text NULL asks for the length only.
        check(unsafe { sys::weft_plan_format(self.raw, what.raw(), ptr::null_mut(), 0, &mut len) })?;
        let mut buf = vec![0u8; len + 1];
        // SAFETY: buf has len + 1 writable bytes.
        check(unsafe {
            sys::weft_plan_format(self.raw, what.raw(), buf.as_mut_ptr() as *mut c_char, buf.len(), &mut len)
        })?;
        buf.truncate(len.min(buf.len() - 1));
        String::from_utf8(buf).map_err(|_| Error::invalid("weft_plan_format wrote non-UTF-8 text"))
    }

    /// The kept layouts as a text table ([`PlanFormat::Table`]).
    pub fn table(&self) -> Result<String> {
        self.format(PlanFormat::Table)
    }

    /// The Amdahl/Gustafson report ([`PlanFormat::Report`]).
    pub fn report(&self) -> Result<String> {
        self.format(PlanFormat::Report)
    }

    /// `weft_plan_destroy`, reporting its status (dropping does the same, ignoring it).
    pub fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: raw came from weft_plan_create/load and is destroyed once.
        check(unsafe { sys::weft_plan_destroy(raw) })
    }
}

impl Drop for LayoutPlan {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: as in destroy (the status of a destroy in drop has nowhere to go).
            unsafe { sys::weft_plan_destroy(self.raw) };
        }
    }
}
