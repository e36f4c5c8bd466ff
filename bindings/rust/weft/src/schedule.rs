//! Pipeline schedules (`weft/pipeline.h`, first part): a [`Schedule`] is plain data, per
//! pipeline rank an ordered list of [`Action`]s, made by a generator ([`Schedule::generate`]),
//! from caller-given lists ([`Schedule::from_actions`]), from torch's CSV
//! ([`Schedule::from_csv`]) or from a file ([`Schedule::load`]); it can be inspected, checked
//! ([`Schedule::validate`]), exported and simulated ([`Schedule::simulate`]).
use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::types::to_c_int;

/// `weft_action_kind_t`: what an [`Action`] does (pipeline.h states each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionKind {
    /// Forward of a micro-batch through a stage.
    F,
    /// The whole backward.
    B,
    /// Backward for the inputs only.
    I,
    /// Backward for the weights only (after I).
    W,
    /// Send a forward activation to the next stage's rank.
    SendF,
    /// Receive a forward activation from the previous stage's rank.
    RecvF,
    /// Send a gradient to the previous stage's rank.
    SendB,
    /// Receive a gradient from the next stage's rank.
    RecvB,
    /// The stage's gradients are complete for the step (micro-batch none).
    ReduceGrad,
    /// A code this binding does not know (a newer library).
    Unknown(i32),
}

impl ActionKind {
    /// The C value (`weft_action_kind_t`).
    pub fn raw(self) -> sys::weft_action_kind_t {
        match self {
            ActionKind::F => sys::WEFT_ACTION_F,
            ActionKind::B => sys::WEFT_ACTION_B,
            ActionKind::I => sys::WEFT_ACTION_I,
            ActionKind::W => sys::WEFT_ACTION_W,
            ActionKind::SendF => sys::WEFT_ACTION_SEND_F,
            ActionKind::RecvF => sys::WEFT_ACTION_RECV_F,
            ActionKind::SendB => sys::WEFT_ACTION_SEND_B,
            ActionKind::RecvB => sys::WEFT_ACTION_RECV_B,
            ActionKind::ReduceGrad => sys::WEFT_ACTION_REDUCE_GRAD,
            ActionKind::Unknown(c) => c,
        }
    }

    /// The kind of a C value (a code this binding does not know panics).
    pub fn from_raw(k: sys::weft_action_kind_t) -> ActionKind {
        match k {
            sys::WEFT_ACTION_F => ActionKind::F,
            sys::WEFT_ACTION_B => ActionKind::B,
            sys::WEFT_ACTION_I => ActionKind::I,
            sys::WEFT_ACTION_W => ActionKind::W,
            sys::WEFT_ACTION_SEND_F => ActionKind::SendF,
            sys::WEFT_ACTION_RECV_F => ActionKind::RecvF,
            sys::WEFT_ACTION_SEND_B => ActionKind::SendB,
            sys::WEFT_ACTION_RECV_B => ActionKind::RecvB,
            sys::WEFT_ACTION_REDUCE_GRAD => ActionKind::ReduceGrad,
            other => ActionKind::Unknown(other),
        }
    }

    /// A compute action (F, B, I, W, REDUCE_GRAD), as opposed to a transfer.
    pub fn is_compute(self) -> bool {
        matches!(self, ActionKind::F | ActionKind::B | ActionKind::I | ActionKind::W | ActionKind::ReduceGrad)
    }

    /// torch's name of the kind ("F", "SEND_F", "REDUCE_GRAD").
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::F => "F",
            ActionKind::B => "B",
            ActionKind::I => "I",
            ActionKind::W => "W",
            ActionKind::SendF => "SEND_F",
            ActionKind::RecvF => "RECV_F",
            ActionKind::SendB => "SEND_B",
            ActionKind::RecvB => "RECV_B",
            ActionKind::ReduceGrad => "REDUCE_GRAD",
            ActionKind::Unknown(_) => "?",
        }
    }
}

/// One action `{kind, stage, microbatch}` (`weft_action_t`, same layout, so a rank's list is
/// borrowed from the schedule without a copy). Displayed as torch writes it: "0F0", "1SEND_F0",
/// "2REDUCE_GRAD".
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Action(sys::weft_action_t);

impl Action {
    /// An action of `stage` on micro-batch `microbatch` (`None` for REDUCE_GRAD). Values beyond
    /// `i32::MAX` saturate there (the library then refuses the schedule).
    pub fn new(kind: ActionKind, stage: usize, microbatch: Option<usize>) -> Action {
        let clamp = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
        Action(sys::weft_action_t { kind: kind.raw(), stage: clamp(stage), microbatch: microbatch.map_or(-1, clamp) })
    }

    /// The action's kind.
    pub fn kind(&self) -> ActionKind {
        ActionKind::from_raw(self.0.kind)
    }

    /// The stage the action runs or moves data for.
    pub fn stage(&self) -> usize {
        self.0.stage.max(0) as usize
    }

    /// The micro-batch; `None` for REDUCE_GRAD (-1 in C).
    pub fn microbatch(&self) -> Option<usize> {
        usize::try_from(self.0.microbatch).ok()
    }

    /// The C struct (`weft_action_t`).
    pub fn raw(&self) -> sys::weft_action_t {
        self.0
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.0.stage, self.kind().name())?;
        match self.microbatch() {
            Some(m) => write!(f, "{m}"),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Action({self})")
    }
}

/// `weft_schedule_kind_t`: the generators (pipeline.h states each one's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduleKind {
    /// Made by [`Schedule::from_actions`], [`Schedule::from_csv`] or [`Schedule::load`].
    Custom,
    /// GPipe: all forwards, then all backwards.
    Gpipe,
    /// 1F1B: one forward, one backward in steady state.
    OneFOneB,
    /// Interleaved 1F1B: several stages per rank (Megatron's virtual pipeline).
    Interleaved1F1B,
    /// Zero-bubble ZB-H1 (backward split into I and W).
    ZbH1,
    /// Zero-bubble ZB-H2.
    ZbH2,
    /// Zero-bubble ZB-V (two stages per rank in a V shape).
    ZbV,
    /// DeepSeek's DualPipeV.
    DualPipeV,
    /// A SCHEDULE plugin's kind by its id (>= `WEFT_PLUGIN_ID_BASE`, the entry's `id`).
    Plugin(sys::weft_schedule_kind_t),
}

impl ScheduleKind {
    /// Every generator, in C enum order.
    pub const GENERATORS: [ScheduleKind; 7] = [
        ScheduleKind::Gpipe,
        ScheduleKind::OneFOneB,
        ScheduleKind::Interleaved1F1B,
        ScheduleKind::ZbH1,
        ScheduleKind::ZbH2,
        ScheduleKind::ZbV,
        ScheduleKind::DualPipeV,
    ];

    /// The C value (`weft_schedule_kind_t`).
    pub fn raw(self) -> sys::weft_schedule_kind_t {
        match self {
            ScheduleKind::Custom => sys::WEFT_SCHEDULE_CUSTOM,
            ScheduleKind::Gpipe => sys::WEFT_SCHEDULE_GPIPE,
            ScheduleKind::OneFOneB => sys::WEFT_SCHEDULE_ONE_F_ONE_B,
            ScheduleKind::Interleaved1F1B => sys::WEFT_SCHEDULE_INTERLEAVED_1F1B,
            ScheduleKind::ZbH1 => sys::WEFT_SCHEDULE_ZB_H1,
            ScheduleKind::ZbH2 => sys::WEFT_SCHEDULE_ZB_H2,
            ScheduleKind::ZbV => sys::WEFT_SCHEDULE_ZB_V,
            ScheduleKind::DualPipeV => sys::WEFT_SCHEDULE_DUALPIPE_V,
            ScheduleKind::Plugin(id) => id,
        }
    }

    /// `None` for a code this binding does not know.
    pub fn from_raw(k: sys::weft_schedule_kind_t) -> Option<ScheduleKind> {
        Some(match k {
            sys::WEFT_SCHEDULE_CUSTOM => ScheduleKind::Custom,
            sys::WEFT_SCHEDULE_GPIPE => ScheduleKind::Gpipe,
            sys::WEFT_SCHEDULE_ONE_F_ONE_B => ScheduleKind::OneFOneB,
            sys::WEFT_SCHEDULE_INTERLEAVED_1F1B => ScheduleKind::Interleaved1F1B,
            sys::WEFT_SCHEDULE_ZB_H1 => ScheduleKind::ZbH1,
            sys::WEFT_SCHEDULE_ZB_H2 => ScheduleKind::ZbH2,
            sys::WEFT_SCHEDULE_ZB_V => ScheduleKind::ZbV,
            sys::WEFT_SCHEDULE_DUALPIPE_V => ScheduleKind::DualPipeV,
            id if id >= sys::WEFT_PLUGIN_ID_BASE => ScheduleKind::Plugin(id),
            _ => return None,
        })
    }
}

/// Generator options (`weft_schedule_config_t`); the default is `WEFT_SCHEDULE_CONFIG_INIT`
/// (one rank, one micro-batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleConfig {
    /// p, the pipeline's ranks (>= 1).
    pub ranks: usize,
    /// m (>= 1).
    pub microbatches: usize,
    /// v; 0 = the method's own (2 for ZB-V and DualPipeV, else 1).
    pub stages_per_rank: usize,
    /// End each rank's list with REDUCE_GRAD per stage, right after its last backward piece.
    pub reduce_grad: bool,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig { ranks: 1, microbatches: 1, stages_per_rank: 0, reduce_grad: false }
    }
}

/// What [`Schedule::info`] reports (`weft_schedule_info_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The generator, or [`ScheduleKind::Custom`]; `None` for a code this binding does not know.
    pub kind: Option<ScheduleKind>,
    /// The number of ranks the schedule runs on.
    pub ranks: usize,
    /// The number of stages.
    pub stages: usize,
    /// The number of micro-batches per step.
    pub microbatches: usize,
    /// The most stages any rank holds.
    pub stages_per_rank: usize,
}

/// `weft_csv_format_t`: which actions [`Schedule::to_csv`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CsvFormat {
    /// Every action (torch's "compute_comms").
    #[default]
    ComputeComms,
    /// F, B, I, W only (torch's "compute_only").
    ComputeOnly,
}

impl CsvFormat {
    /// The C value (`weft_csv_format_t`).
    pub fn raw(self) -> sys::weft_csv_format_t {
        match self {
            CsvFormat::ComputeComms => sys::WEFT_CSV_COMPUTE_COMMS,
            CsvFormat::ComputeOnly => sys::WEFT_CSV_COMPUTE_ONLY,
        }
    }
}

pub(crate) fn path_c(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::invalid(format!("path {} contains a NUL byte", p.display())))
}

/// A pipeline schedule (`weft_schedule_t`): immutable, so it may be shared between threads.
/// Dropping it destroys the handle; timelines and pipelines made from it keep their own
/// reference.
pub struct Schedule {
    raw: sys::weft_schedule_t,
}

// SAFETY: pipeline.h: a schedule is immutable after creation and may be read from any number of
// threads; destroying it (Drop) needs the only reference.
unsafe impl Send for Schedule {}
unsafe impl Sync for Schedule {}

impl Schedule {
    fn made(f: impl FnOnce(*mut sys::weft_schedule_t) -> sys::weft_status_t) -> Result<Schedule> {
        let mut raw = ptr::null_mut();
        check(f(&mut raw))?;
        Ok(Schedule { raw })
    }

    /// `weft_schedule_generate`: the schedule of generator `kind` with its SEND/RECV actions;
    /// a violated rule of the method is [`Status::InvalidArgument`](crate::Status) naming it.
    pub fn generate(kind: ScheduleKind, config: &ScheduleConfig) -> Result<Schedule> {
        let mut c = sys::WEFT_SCHEDULE_CONFIG_INIT;
        c.ranks = to_c_int(config.ranks, "ScheduleConfig::ranks")?;
        c.microbatches = to_c_int(config.microbatches, "ScheduleConfig::microbatches")?;
        c.stages_per_rank = to_c_int(config.stages_per_rank, "ScheduleConfig::stages_per_rank")?;
        c.reduce_grad = config.reduce_grad as c_int;
        // SAFETY: the config lives for the call; the out-pointer is valid.
        Schedule::made(|out| unsafe { sys::weft_schedule_generate(kind.raw(), &c, out) })
    }

    /// `weft_schedule_create`: a schedule from one action list per rank (copied). Lists without
    /// any SEND/RECV get them inserted; everything but the kinds and signs is checked by
    /// [`Schedule::validate`], so a broken schedule can still be built and inspected.
    pub fn from_actions<L: AsRef<[Action]>>(lists: &[L]) -> Result<Schedule> {
        let n = to_c_int(lists.len(), "number of rank lists")?;
        // Action is repr(transparent) over weft_action_t.
        let ptrs: Vec<*const sys::weft_action_t> =
            lists.iter().map(|l| l.as_ref().as_ptr() as *const sys::weft_action_t).collect();
        let counts: Vec<usize> = lists.iter().map(|l| l.as_ref().len()).collect();
        // SAFETY: every list is borrowed for the call and is counts[r] actions long.
        Schedule::made(|out| unsafe { sys::weft_schedule_create(n, ptrs.as_ptr(), counts.as_ptr(), out) })
    }

    /// `weft_schedule_from_csv`: parses torch's CSV (either form; "\n" or "\r\n" rows).
    pub fn from_csv(text: &str) -> Result<Schedule> {
        // SAFETY: the text is borrowed for the call with its length (no NUL needed).
        Schedule::made(|out| unsafe { sys::weft_schedule_from_csv(text.as_ptr() as *const c_char, text.len(), out) })
    }

    /// `weft_schedule_load`: a schedule saved by [`Schedule::save`] (verified before reading).
    pub fn load(path: impl AsRef<Path>) -> Result<Schedule> {
        let p = path_c(path.as_ref())?;
        // SAFETY: the path lives for the call.
        Schedule::made(|out| unsafe { sys::weft_schedule_load(p.as_ptr(), out) })
    }

    /// Takes ownership of a handle made through `weft-sys`.
    ///
    /// # Safety
    /// `raw` must be a live schedule handle that nothing else destroys.
    pub unsafe fn from_raw(raw: sys::weft_schedule_t) -> Schedule {
        Schedule { raw }
    }

    /// The raw `weft_schedule_t` handle (owned by this value).
    pub fn as_raw(&self) -> sys::weft_schedule_t {
        self.raw
    }

    /// `weft_schedule_info`: kind, p, S, m and the most stages any rank holds.
    pub fn info(&self) -> Result<ScheduleInfo> {
        let mut i = sys::WEFT_SCHEDULE_INFO_INIT;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::weft_schedule_info(self.raw, &mut i) })?;
        let u = |v: c_int| v.max(0) as usize;
        Ok(ScheduleInfo {
            kind: ScheduleKind::from_raw(i.kind),
            ranks: u(i.ranks),
            stages: u(i.stages),
            microbatches: u(i.microbatches),
            stages_per_rank: u(i.stages_per_rank),
        })
    }

    /// `weft_schedule_actions`: rank `rank`'s actions in order, borrowed from the schedule.
    pub fn actions(&self, rank: usize) -> Result<&[Action]> {
        let r = to_c_int(rank, "rank")?;
        let (mut p, mut n) = (ptr::null(), 0usize);
        // SAFETY: live handle, valid out-pointers.
        check(unsafe { sys::weft_schedule_actions(self.raw, r, &mut p, &mut n) })?;
        if n == 0 || p.is_null() {
            return Ok(&[]);
        }
        // SAFETY: the library's view of n actions lives as long as the handle, which `self`
        // borrows; Action is repr(transparent) over weft_action_t.
        Ok(unsafe { std::slice::from_raw_parts(p as *const Action, n) })
    }

    /// `weft_schedule_stage_rank`: the rank that holds `stage`, `None` when no rank runs its
    /// forward.
    pub fn stage_rank(&self, stage: usize) -> Result<Option<usize>> {
        let s = to_c_int(stage, "stage")?;
        let mut r: c_int = -1;
        // SAFETY: live handle, valid out-pointer.
        check(unsafe { sys::weft_schedule_stage_rank(self.raw, s, &mut r) })?;
        Ok(usize::try_from(r).ok())
    }

    /// `weft_schedule_validate`: `Ok`, or an InvalidArgument error naming the rank, the action
    /// index, the action and the rule broken (placement, completeness, order, transfers, no
    /// deadlock).
    pub fn validate(&self) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::weft_schedule_validate(self.raw) })
    }

    /// `weft_schedule_to_csv`: torch's CSV, one row per rank, rows ended by "\r\n".
    pub fn to_csv(&self, format: CsvFormat) -> Result<String> {
        let mut len = 0usize;
        // SAFETY: text NULL asks for the length only.
        check(unsafe { sys::weft_schedule_to_csv(self.raw, format.raw(), ptr::null_mut(), 0, &mut len) })?;
        let mut buf = vec![0u8; len + 1];
        // SAFETY: buf has len + 1 writable bytes.
        check(unsafe {
            sys::weft_schedule_to_csv(self.raw, format.raw(), buf.as_mut_ptr() as *mut c_char, buf.len(), &mut len)
        })?;
        buf.truncate(len.min(buf.len() - 1));
        String::from_utf8(buf).map_err(|_| Error::invalid("weft_schedule_to_csv wrote non-UTF-8 text"))
    }

    /// `weft_schedule_save`: writes the schedule as a FlatBuffers file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path_c(path.as_ref())?;
        // SAFETY: live handle; the path lives for the call.
        check(unsafe { sys::weft_schedule_save(self.raw, p.as_ptr()) })
    }
}

impl Drop for Schedule {
    fn drop(&mut self) {
        // SAFETY: the handle is live and owned; errors cannot be reported from Drop.
        unsafe { sys::weft_schedule_destroy(self.raw) };
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Ok(i) => write!(f, "Schedule({:?}, p={}, S={}, m={})", i.kind, i.ranks, i.stages, i.microbatches),
            Err(_) => f.write_str("Schedule(..)"),
        }
    }
}
