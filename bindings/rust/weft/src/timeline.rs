//! Timelines, simulation and tuning (`weft/pipeline.h`, middle part): a [`Timeline`] holds what
//! happened, or would happen, on each rank (from [`Schedule::simulate`] with [`Costs`], or from
//! a recorded [`Pipeline::run`](crate::Pipeline::run)); [`tune`] picks a schedule, micro-batch
//! count and virtual stages from per-layer costs.
use std::ffi::c_int;
use std::path::Path;
use std::ptr;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::schedule::{path_c, Schedule, ScheduleKind};
use crate::types::to_c_int;

/// `weft_timeline_format_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimelineFormat {
    /// Ranks as rows, actions as boxes labelled with the micro-batch.
    Svg,
    /// JSON for chrome://tracing and Perfetto.
    ChromeTrace,
}

impl TimelineFormat {
    /// The C value (`weft_timeline_format_t`).
    pub fn raw(self) -> sys::weft_timeline_format_t {
        match self {
            TimelineFormat::Svg => sys::WEFT_TIMELINE_SVG,
            TimelineFormat::ChromeTrace => sys::WEFT_TIMELINE_CHROME_TRACE,
        }
    }
}

/// Per-rank totals (`weft_rank_stats_t`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RankStats {
    /// Time in F, B, I, W, REDUCE_GRAD.
    pub busy: f64,
    /// makespan - busy.
    pub idle: f64,
    /// Most micro-batch activations held at once.
    pub peak_activations: usize,
    /// The same in bytes (simulation: from the costs; a run: 0).
    pub peak_activation_bytes: f64,
}

/// One rank's times ([`Timeline::rank`]): `start[k]` and `end[k]` of action k of the schedule's
/// list for that rank, borrowed from the timeline.
#[derive(Debug, Clone, Copy)]
pub struct RankTimes<'t> {
    /// Start time of each action, in the rank's list order.
    pub start: &'t [f64],
    /// End time of each action, in the rank's list order.
    pub end: &'t [f64],
    /// The rank's totals (busy, idle, peak memory).
    pub stats: RankStats,
}

/// A timeline (`weft_timeline_t`): immutable, shareable between threads; dropping it destroys it.
pub struct Timeline {
    raw: sys::weft_timeline_t,
}

// SAFETY: pipeline.h: a timeline is immutable after creation and may be read from any thread.
unsafe impl Send for Timeline {}
unsafe impl Sync for Timeline {}

impl Timeline {
    /// Takes ownership of a handle made through `weft-sys` (or by the library for a run).
    ///
    /// # Safety
    /// `raw` must be a live timeline handle that nothing else destroys.
    pub unsafe fn from_raw(raw: sys::weft_timeline_t) -> Timeline {
        Timeline { raw }
    }

    /// The raw `weft_timeline_t` handle (owned by this value).
    pub fn as_raw(&self) -> sys::weft_timeline_t {
        self.raw
    }

    fn info(&self) -> sys::weft_timeline_info_t {
        let mut i = sys::WEFT_TIMELINE_INFO_INIT;
        // SAFETY: live handle, valid out-pointer; a live handle cannot fail here, and should it,
        // the zeroed info is returned.
        unsafe { sys::weft_timeline_info(self.raw, &mut i) };
        i
    }

    /// The number of ranks (`weft_timeline_info`).
    pub fn ranks(&self) -> usize {
        self.info().ranks.max(0) as usize
    }

    /// The latest end over all ranks.
    pub fn makespan(&self) -> f64 {
        self.info().makespan
    }

    /// idle / (ranks * makespan).
    pub fn bubble_fraction(&self) -> f64 {
        self.info().bubble_fraction
    }

    /// `weft_timeline_rank`: rank `rank`'s start and end times and totals.
    pub fn rank(&self, rank: usize) -> Result<RankTimes<'_>> {
        let r = to_c_int(rank, "rank")?;
        let (mut s, mut e, mut n) = (ptr::null(), ptr::null(), 0usize);
        let mut st = sys::WEFT_RANK_STATS_INIT;
        // SAFETY: live handle, valid out-pointers.
        check(unsafe { sys::weft_timeline_rank(self.raw, r, &mut s, &mut e, &mut n, &mut st) })?;
        let view = |p: *const f64| {
            if n == 0 || p.is_null() {
                &[][..]
            } else {
                // SAFETY: n doubles owned by the timeline, which `self` borrows.
                unsafe { std::slice::from_raw_parts(p, n) }
            }
        };
        Ok(RankTimes {
            start: view(s),
            end: view(e),
            stats: RankStats {
                busy: st.busy,
                idle: st.idle,
                peak_activations: st.peak_activations.max(0) as usize,
                peak_activation_bytes: st.peak_activation_bytes,
            },
        })
    }

    /// `weft_timeline_write`: an SVG picture or a Chrome trace at `path`.
    pub fn write(&self, format: TimelineFormat, path: impl AsRef<Path>) -> Result<()> {
        let p = path_c(path.as_ref())?;
        // SAFETY: live handle; the path lives for the call.
        check(unsafe { sys::weft_timeline_write(self.raw, format.raw(), p.as_ptr()) })
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        // SAFETY: the handle is live and owned.
        unsafe { sys::weft_timeline_destroy(self.raw) };
    }
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.info();
        write!(f, "Timeline(ranks={}, makespan={}, bubble={})", i.ranks, i.makespan, i.bubble_fraction)
    }
}

/// Costs for the simulator (`weft_pipeline_costs_t`), one entry per stage in each vector (the
/// number of stages is `forward.len()`); pipeline.h states the model. `None` fields take the
/// header's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Costs {
    /// The time of F per stage (its length is the number of stages).
    pub forward: Vec<f64>,
    /// The time of B; `None` = backward_input + backward_weight.
    pub backward: Option<Vec<f64>>,
    /// The times of I and W; `None` = half of backward each.
    pub backward_input: Option<Vec<f64>>,
    /// The time of W per stage; `None` = half of backward.
    pub backward_weight: Option<Vec<f64>>,
    /// What F keeps until its backward is done (`None` = 0 bytes).
    pub activation_bytes: Option<Vec<f64>>,
    /// Of it, what is still kept after I until W (`None` = all of it).
    pub weight_grad_bytes: Option<Vec<f64>>,
    /// Bytes of each stage's output (`None` = 0).
    pub boundary_bytes: Option<Vec<f64>>,
    /// A message takes latency + bytes / bandwidth (bandwidth 0 = infinite).
    pub latency: f64,
    /// Bytes per time unit of a message (0 = infinite).
    pub bandwidth: f64,
    /// Added to every compute action.
    pub overhead: f64,
    /// The time of REDUCE_GRAD (`None` = 0).
    pub reduce_grad: Option<Vec<f64>>,
    /// 0 = the vectors above; a COST_MODEL plugin's id = every compute action's time from the
    /// plugin (`forward` then only gives the number of stages).
    pub cost_model: i32,
    /// Samples per micro-batch, passed to the cost model (0 = the header's default, 1).
    pub microbatch_size: i32,
}

impl Costs {
    /// Every stage with forward time `f` and backward time `b` (I and W half of it each).
    pub fn uniform(stages: usize, f: f64, b: f64) -> Costs {
        Costs { forward: vec![f; stages], backward: Some(vec![b; stages]), ..Costs::default() }
    }

    /// The C struct pointing into `self` (valid while `self` is borrowed).
    fn raw(&self) -> Result<sys::weft_pipeline_costs_t> {
        let n = self.forward.len();
        let arr = |v: &Option<Vec<f64>>, what: &str| -> Result<*const f64> {
            match v {
                None => Ok(ptr::null()),
                Some(v) if v.len() == n => Ok(v.as_ptr()),
                Some(v) => Err(Error::invalid(format!("Costs::{what} has {} entries for {n} stages", v.len()))),
            }
        };
        let mut c = sys::WEFT_PIPELINE_COSTS_INIT;
        c.nstages = to_c_int(n, "Costs::forward.len()")?;
        c.forward = if n == 0 { ptr::null() } else { self.forward.as_ptr() };
        c.backward = arr(&self.backward, "backward")?;
        c.backward_input = arr(&self.backward_input, "backward_input")?;
        c.backward_weight = arr(&self.backward_weight, "backward_weight")?;
        c.activation_bytes = arr(&self.activation_bytes, "activation_bytes")?;
        c.weight_grad_bytes = arr(&self.weight_grad_bytes, "weight_grad_bytes")?;
        c.boundary_bytes = arr(&self.boundary_bytes, "boundary_bytes")?;
        c.latency = self.latency;
        c.bandwidth = self.bandwidth;
        c.overhead = self.overhead;
        c.reduce_grad = arr(&self.reduce_grad, "reduce_grad")?;
        c.cost_model = self.cost_model;
        if self.microbatch_size != 0 {
            c.microbatch_size = self.microbatch_size;
        }
        Ok(c)
    }
}

impl Schedule {
    /// `weft_schedule_simulate`: the timeline of this (valid) schedule under `costs`.
    pub fn simulate(&self, costs: &Costs) -> Result<Timeline> {
        let c = costs.raw()?;
        let mut raw = ptr::null_mut();
        // SAFETY: live handle; c points into `costs`, borrowed for the call.
        check(unsafe { sys::weft_schedule_simulate(self.as_raw(), &c, &mut raw) })?;
        Ok(Timeline { raw })
    }
}

/// Auto-tuning input (`weft_tune_config_t`); pipeline.h states the model. The number of layers
/// is `layer_forward.len()` (`layer_backward` as long).
#[derive(Debug, Clone, PartialEq)]
pub struct TuneConfig {
    /// p.
    pub ranks: usize,
    /// Per layer, the time of one sample's forward and backward.
    pub layer_forward: Vec<f64>,
    /// Per layer, the time of one sample's backward.
    pub layer_backward: Vec<f64>,
    /// Samples per step; a candidate's micro-batch count divides it.
    pub global_batch: usize,
    /// Time added to every compute action.
    pub microbatch_overhead: f64,
    /// Activation bytes one sample keeps per layer.
    pub activation_bytes_per_sample: f64,
    /// Bytes of one sample's boundary activation.
    pub boundary_bytes_per_sample: f64,
    /// The fixed time of one message.
    pub latency: f64,
    /// Bytes per time unit of a message (0 = infinite).
    pub bandwidth: f64,
    /// Bytes of activations a rank may hold (0 = no cap).
    pub memory_cap: f64,
    /// Added to each rank's peak.
    pub static_bytes: f64,
    /// The generators to try (`None` = all).
    pub kinds: Option<Vec<ScheduleKind>>,
    /// The largest v tried for interleaved 1F1B (0 = 4).
    pub max_stages_per_rank: usize,
    /// The largest m tried (0 = global_batch).
    pub max_microbatches: usize,
    /// 0 = the layer tables; a COST_MODEL plugin's id = stage times from the plugin.
    pub cost_model: i32,
}

impl Default for TuneConfig {
    /// `WEFT_TUNE_CONFIG_INIT`: one rank, no layers, a batch of one.
    fn default() -> Self {
        TuneConfig {
            ranks: 1,
            layer_forward: Vec::new(),
            layer_backward: Vec::new(),
            global_batch: 1,
            microbatch_overhead: 0.0,
            activation_bytes_per_sample: 0.0,
            boundary_bytes_per_sample: 0.0,
            latency: 0.0,
            bandwidth: 0.0,
            memory_cap: 0.0,
            static_bytes: 0.0,
            kinds: None,
            max_stages_per_rank: 0,
            max_microbatches: 0,
            cost_model: 0,
        }
    }
}

/// One tuning candidate (`weft_tune_candidate_t`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// `None` for a generator this binding does not know.
    pub kind: Option<ScheduleKind>,
    /// Micro-batches per step.
    pub microbatches: usize,
    /// Stages each rank holds.
    pub stages_per_rank: usize,
    /// Samples per micro-batch.
    pub microbatch_size: usize,
    /// Simulated makespan.
    pub step_time: f64,
    /// Idle fraction of the simulated step.
    pub bubble_fraction: f64,
    /// The largest rank's activation peak + static_bytes.
    pub peak_bytes: f64,
    /// peak_bytes <= memory_cap (or no cap).
    pub fits: bool,
}

/// `weft_schedule_tune`: every allowed (kind, m, v) simulated, sorted by step time (those that
/// fit first), and the index of the fastest that fits (`None` when none fits). Its schedule is
/// `Schedule::generate(kind, {ranks, microbatches, stages_per_rank})`.
pub fn tune(config: &TuneConfig) -> Result<(Vec<Candidate>, Option<usize>)> {
    let layers = config.layer_forward.len();
    if config.layer_backward.len() != layers {
        return Err(Error::invalid(format!(
            "TuneConfig: {} layer_backward entries for {layers} layers",
            config.layer_backward.len()
        )));
    }
    let kinds: Option<Vec<sys::weft_schedule_kind_t>> =
        config.kinds.as_ref().map(|k| k.iter().map(|k| k.raw()).collect());
    let mut c = sys::WEFT_TUNE_CONFIG_INIT;
    c.ranks = to_c_int(config.ranks, "TuneConfig::ranks")?;
    c.layers = to_c_int(layers, "TuneConfig::layer_forward.len()")?;
    if layers > 0 {
        c.layer_forward = config.layer_forward.as_ptr();
        c.layer_backward = config.layer_backward.as_ptr();
    }
    c.global_batch = to_c_int(config.global_batch, "TuneConfig::global_batch")?;
    c.microbatch_overhead = config.microbatch_overhead;
    c.activation_bytes_per_sample = config.activation_bytes_per_sample;
    c.boundary_bytes_per_sample = config.boundary_bytes_per_sample;
    c.latency = config.latency;
    c.bandwidth = config.bandwidth;
    c.memory_cap = config.memory_cap;
    c.static_bytes = config.static_bytes;
    if let Some(k) = &kinds {
        c.kinds = if k.is_empty() { ptr::null() } else { k.as_ptr() };
        c.nkinds = k.len();
    }
    c.max_stages_per_rank = to_c_int(config.max_stages_per_rank, "TuneConfig::max_stages_per_rank")?;
    c.max_microbatches = to_c_int(config.max_microbatches, "TuneConfig::max_microbatches")?;
    c.cost_model = config.cost_model;

    let (mut count, mut best): (usize, c_int) = (0, -1);
    // SAFETY: c and the arrays it points at live for the call; candidates NULL asks the count.
    check(unsafe { sys::weft_schedule_tune(&c, ptr::null_mut(), 0, &mut count, &mut best) })?;
    let mut raw = vec![sys::weft_tune_candidate_t::default(); count];
    // SAFETY: raw has room for `count` candidates.
    check(unsafe { sys::weft_schedule_tune(&c, raw.as_mut_ptr(), raw.len(), &mut count, &mut best) })?;
    raw.truncate(count);
    let u = |v: c_int| v.max(0) as usize;
    let out = raw
        .iter()
        .map(|r| Candidate {
            kind: ScheduleKind::from_raw(r.kind),
            microbatches: u(r.microbatches),
            stages_per_rank: u(r.stages_per_rank),
            microbatch_size: u(r.microbatch_size),
            step_time: r.step_time,
            bubble_fraction: r.bubble_fraction,
            peak_bytes: r.peak_bytes,
            fits: r.fits != 0,
        })
        .collect::<Vec<_>>();
    let best = usize::try_from(best).ok().filter(|&b| b < out.len());
    Ok((out, best))
}
