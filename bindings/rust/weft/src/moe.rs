//! Expert parallelism (`weft/moe.h`) over host memory: the router ([`route`],
//! [`router_backward`], [`update_bias`]), the dispatch [`layout`], and [`Moe`], whose
//! [`Moe::dispatch`] sends each token to the ranks of its experts and returns a [`MoeHandle`]
//! (the received rows as slices) that [`Moe::combine`] and [`Moe::combine_backward`] reuse.
//! Device memory and streams are reachable through [`crate::sys`].
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::ptr;

use weft_sys as sys;

use crate::comm::Comm;
use crate::error::{check, Error, Result};
use crate::types::{to_c_int, Dtype, WeftType};

/// How the router scores experts (`weft_router_score_t`; moe.h gives the formulas).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RouterScore {
    /// softmax over all experts, the k largest probabilities.
    #[default]
    Softmax,
    /// the k largest logits, weights = softmax over those k.
    TopkSoftmax,
    /// sigmoid scores, weights = the k scores over their sum.
    Sigmoid,
}

impl RouterScore {
    /// The C value (`weft_router_score_t`).
    pub fn raw(self) -> sys::weft_router_score_t {
        match self {
            RouterScore::Softmax => sys::WEFT_ROUTER_SOFTMAX,
            RouterScore::TopkSoftmax => sys::WEFT_ROUTER_TOPK_SOFTMAX,
            RouterScore::Sigmoid => sys::WEFT_ROUTER_SIGMOID,
        }
    }
}

/// Which slots an expert over capacity drops (`weft_router_drop_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DropPolicy {
    /// Dropless: no capacity.
    #[default]
    None,
    /// Each expert keeps its C assignments of highest weight (ties: the lower token).
    ByProbability,
    /// Each expert keeps its first C assignments in token order.
    ByPosition,
}

impl DropPolicy {
    /// The C value (`weft_router_drop_t`).
    pub fn raw(self) -> sys::weft_router_drop_t {
        match self {
            DropPolicy::None => sys::WEFT_DROP_NONE,
            DropPolicy::ByProbability => sys::WEFT_DROP_BY_PROBABILITY,
            DropPolicy::ByPosition => sys::WEFT_DROP_BY_POSITION,
        }
    }
}

/// Router options (`weft_router_config_t`); `Default` is the header's WEFT_ROUTER_CONFIG_INIT.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterConfig {
    /// E.
    pub experts: usize,
    /// k (1 <= k <= E).
    pub topk: usize,
    /// How logits become scores (softmax or sigmoid).
    pub score: RouterScore,
    /// Renormalise Softmax weights to sum 1 over the k.
    pub normalize: bool,
    /// Group-limited routing: E experts in `groups` equal groups (0 or 1 = off).
    pub groups: usize,
    /// With `groups`: how many groups each token may pick experts from.
    pub topk_groups: usize,
    /// E values added to the scores for selection only (see [`update_bias`]).
    pub bias: Option<Vec<f32>>,
    /// What happens to assignments beyond an expert's capacity.
    pub drop: DropPolicy,
    /// C = ceil(T * k / E * capacity_factor) per expert when dropping.
    pub capacity_factor: f64,
    /// Coefficient of the load-balancing auxiliary loss (0 = off).
    pub aux_loss_coeff: f32,
    /// Coefficient of the router z-loss (0 = off).
    pub z_loss_coeff: f32,
    /// 0 = the built-in top-k selection; a ROUTER plugin's id (its [`PluginEntry`](crate::PluginEntry)'s `id`).
    pub selector: i32,
}

impl Default for RouterConfig {
    fn default() -> RouterConfig {
        RouterConfig {
            experts: 0,
            topk: 1,
            score: RouterScore::Softmax,
            normalize: false,
            groups: 0,
            topk_groups: 0,
            bias: None,
            drop: DropPolicy::None,
            capacity_factor: 1.0,
            aux_loss_coeff: 0.0,
            z_loss_coeff: 0.0,
            selector: 0,
        }
    }
}

impl RouterConfig {
    /// The C struct; its bias pointer borrows `self`.
    fn raw(&self) -> Result<sys::weft_router_config_t> {
        if let Some(b) = &self.bias {
            if b.len() != self.experts {
                return Err(Error::invalid(format!(
                    "RouterConfig.bias has {} values, expected experts = {}",
                    b.len(),
                    self.experts
                )));
            }
        }
        Ok(sys::weft_router_config_t {
            experts: to_c_int(self.experts, "RouterConfig.experts")?,
            topk: to_c_int(self.topk, "RouterConfig.topk")?,
            score: self.score.raw(),
            normalize: self.normalize as c_int,
            groups: to_c_int(self.groups, "RouterConfig.groups")?,
            topk_groups: to_c_int(self.topk_groups, "RouterConfig.topk_groups")?,
            bias: self.bias.as_ref().map_or(ptr::null(), |b| b.as_ptr()),
            drop: self.drop.raw(),
            capacity_factor: self.capacity_factor,
            aux_loss_coeff: self.aux_loss_coeff,
            z_loss_coeff: self.z_loss_coeff,
            selector: self.selector,
            ..sys::WEFT_ROUTER_CONFIG_INIT
        })
    }

    /// T from a logits slice of T * E values.
    fn tokens_of(&self, logits_len: usize) -> Result<usize> {
        if self.experts == 0 || !logits_len.is_multiple_of(self.experts) {
            return Err(Error::invalid(format!(
                "logits hold {logits_len} values, expected a multiple of experts = {} (shape [T, E])",
                self.experts
            )));
        }
        Ok(logits_len / self.experts)
    }
}

/// What the router chose (`weft_router_result_t`), per token t and slot j at `t * k + j`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterResult {
    /// The expert of each slot, or [`sys::WEFT_MOE_DROPPED`].
    pub indices: Vec<i32>,
    /// Each slot's weight (0 when dropped).
    pub weights: Vec<f32>,
    /// Assignments per expert kept after dropping.
    pub tokens_per_expert: Vec<i64>,
    /// Assignments per expert before dropping.
    pub selected_per_expert: Vec<i64>,
    /// The load-balancing auxiliary loss, already multiplied by its coefficient.
    pub aux_loss: f32,
    /// The router z-loss, already multiplied by its coefficient.
    pub z_loss: f32,
}

/// A host `weft_tensor_t` over `data` with the given shape; `shape` must outlive its use.
fn host_tensor<T: WeftType>(data: *const T, shape: &[i64; 2]) -> sys::weft_tensor_t {
    sys::weft_tensor_t {
        data: data as *mut c_void,
        device_type: sys::WEFT_DEVICE_CPU,
        device_id: 0,
        ndim: 2,
        dtype: T::DTYPE.raw(),
        shape: shape.as_ptr(),
        strides: ptr::null(),
        byte_offset: 0,
    }
}

fn dims(rows: usize, cols: usize) -> [i64; 2] {
    [rows as i64, cols as i64]
}

fn expect_len(what: &str, got: usize, want: usize, shape: &str) -> Result<()> {
    if got != want {
        return Err(Error::invalid(format!("{what} holds {got} values, expected {want} ({shape})")));
    }
    Ok(())
}

/// `weft_router_forward` on host logits `[T, E]` (f32 or [`crate::Bf16`]; T = len / E).
pub fn route<T: WeftType>(logits: &[T], config: &RouterConfig) -> Result<RouterResult> {
    let tokens = config.tokens_of(logits.len())?;
    let c = config.raw()?;
    let slots = tokens * config.topk;
    let mut r = RouterResult {
        indices: vec![0; slots],
        weights: vec![0.0; slots],
        tokens_per_expert: vec![0; config.experts],
        selected_per_expert: vec![0; config.experts],
        aux_loss: 0.0,
        z_loss: 0.0,
    };
    let shape = dims(tokens, config.experts);
    let t = host_tensor(logits.as_ptr(), &shape);
    let mut raw = sys::weft_router_result_t {
        indices: r.indices.as_mut_ptr(),
        weights: r.weights.as_mut_ptr(),
        tokens_per_expert: r.tokens_per_expert.as_mut_ptr(),
        selected_per_expert: r.selected_per_expert.as_mut_ptr(),
        ..sys::WEFT_ROUTER_RESULT_INIT
    };
    // SAFETY: the logits and the result arrays are live, host, and sized [T, E], [T, k], [E].
    check(unsafe { sys::weft_router_forward(&t, &c, &mut raw, ptr::null_mut()) })?;
    r.aux_loss = raw.aux_loss;
    r.z_loss = raw.z_loss;
    Ok(r)
}

/// `weft_router_backward`: the gradient `[T, E]` (f32) of sum(grad_weights * weights) +
/// grad_aux * aux_loss + grad_z * z_loss with respect to the logits, `indices` (as [`route`]
/// returned them) held fixed.
pub fn router_backward<T: WeftType>(
    logits: &[T],
    config: &RouterConfig,
    indices: &[i32],
    grad_weights: &[f32],
    grad_aux: f32,
    grad_z: f32,
) -> Result<Vec<f32>> {
    let tokens = config.tokens_of(logits.len())?;
    let c = config.raw()?;
    expect_len("indices", indices.len(), tokens * config.topk, "[T, k]")?;
    expect_len("grad_weights", grad_weights.len(), tokens * config.topk, "[T, k]")?;
    let mut grad = vec![0f32; logits.len()];
    let shape = dims(tokens, config.experts);
    let (t, g) = (host_tensor(logits.as_ptr(), &shape), host_tensor(grad.as_mut_ptr() as *const f32, &shape));
    // SAFETY: every array is live, host and of the size checked above.
    check(unsafe {
        sys::weft_router_backward(
            &t,
            &c,
            indices.as_ptr(),
            grad_weights.as_ptr(),
            grad_aux,
            grad_z,
            &g,
            ptr::null_mut(),
        )
    })?;
    Ok(grad)
}

/// `weft_router_update_bias`: `bias[e] += rate * sign(mean - load[e])`, load = tokens_per_expert.
pub fn update_bias(bias: &mut [f32], tokens_per_expert: &[i64], rate: f32) -> Result<()> {
    expect_len("tokens_per_expert", tokens_per_expert.len(), bias.len(), "one per expert")?;
    let e = to_c_int(bias.len(), "experts")?;
    // SAFETY: both arrays hold `e` entries.
    check(unsafe { sys::weft_router_update_bias(bias.as_mut_ptr(), tokens_per_expert.as_ptr(), e, rate) })
}

/// The dispatch layout (`weft_moe_layout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Tokens that go to each rank (once per rank, however many of its experts it holds).
    pub tokens_per_rank: Vec<i64>,
    /// Kept slots per expert.
    pub tokens_per_expert: Vec<i64>,
    /// `[T * nranks]`: 1 where token t goes to rank r.
    pub token_in_rank: Vec<u8>,
}

/// `weft_moe_layout` of `indices` `[T, topk]` over `nranks` ranks; `expert_rank` None =
/// contiguous blocks.
pub fn layout(
    indices: &[i32],
    topk: usize,
    experts: usize,
    nranks: usize,
    expert_rank: Option<&[i32]>,
) -> Result<Layout> {
    if topk == 0 || !indices.len().is_multiple_of(topk) {
        return Err(Error::invalid(format!("indices hold {} values, expected [T, topk = {topk}]", indices.len())));
    }
    if let Some(er) = expert_rank {
        expect_len("expert_rank", er.len(), experts, "one rank per expert")?;
    }
    let tokens = indices.len() / topk;
    let mut l = Layout {
        tokens_per_rank: vec![0; nranks],
        tokens_per_expert: vec![0; experts],
        token_in_rank: vec![0; tokens * nranks],
    };
    // SAFETY: the arrays hold [T, k], [E], [nranks], [E], [T * nranks] entries.
    check(unsafe {
        sys::weft_moe_layout(
            indices.as_ptr(),
            tokens,
            to_c_int(topk, "topk")?,
            to_c_int(experts, "experts")?,
            to_c_int(nranks, "nranks")?,
            expert_rank.map_or(ptr::null(), |e| e.as_ptr()),
            l.tokens_per_rank.as_mut_ptr(),
            l.tokens_per_expert.as_mut_ptr(),
            l.token_in_rank.as_mut_ptr(),
        )
    })?;
    Ok(l)
}

/// Options of [`Moe`] (`weft_moe_config_t`, host memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoeConfig {
    /// E.
    pub experts: usize,
    /// H.
    pub hidden: usize,
    /// The token dtype: F32, Bf16 or F16.
    pub dtype: Dtype,
    /// Expert e on rank `expert_rank[e]`; None = contiguous blocks (torch.chunk's rule).
    pub expert_rank: Option<Vec<i32>>,
    /// Pad each local expert's rows to a multiple of it (0 or 1 = none).
    pub expert_alignment: usize,
    /// Tokens travel as FP8 E4M3 with one scale per token.
    pub fp8_dispatch: bool,
}

impl Default for MoeConfig {
    fn default() -> MoeConfig {
        MoeConfig {
            experts: 0,
            hidden: 0,
            dtype: Dtype::F32,
            expert_rank: None,
            expert_alignment: 0,
            fp8_dispatch: false,
        }
    }
}

/// Dispatch and combine over a communicator (`weft_moe_t`), collective: every rank makes the
/// same calls. Dropping it destroys it.
pub struct Moe<'c> {
    raw: sys::weft_moe_t,
    hidden: usize,
    dtype: Dtype,
    _comm: PhantomData<&'c Comm>,
}

impl<'c> Moe<'c> {
    /// `weft_moe_create`, collective (every rank the same config).
    pub fn new(comm: &'c Comm, config: &MoeConfig) -> Result<Moe<'c>> {
        if let Some(er) = &config.expert_rank {
            expect_len("MoeConfig.expert_rank", er.len(), config.experts, "one rank per expert")?;
        }
        let c = sys::weft_moe_config_t {
            experts: to_c_int(config.experts, "MoeConfig.experts")?,
            hidden: config.hidden,
            dtype: config.dtype.raw(),
            expert_rank: config.expert_rank.as_ref().map_or(ptr::null(), |e| e.as_ptr()),
            expert_alignment: config.expert_alignment,
            fp8_dispatch: config.fp8_dispatch as c_int,
            device: 0,
            ..sys::WEFT_MOE_CONFIG_INIT
        };
        let mut raw = ptr::null_mut();
        // SAFETY: the communicator is live; the config and its expert_rank live for the call.
        check(unsafe { sys::weft_moe_create(comm.as_raw(), &c, &mut raw) })?;
        Ok(Moe { raw, hidden: config.hidden, dtype: config.dtype, _comm: PhantomData })
    }

    /// The raw `weft_moe_t` handle (owned by this value).
    pub fn as_raw(&self) -> sys::weft_moe_t {
        self.raw
    }

    fn check_dtype<T: WeftType>(&self, what: &str) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!("{what} is {:?}, the Moe's dtype is {:?}", T::DTYPE, self.dtype)));
        }
        Ok(())
    }

    /// `weft_moe_dispatch`, collective: `x` `[T, H]`, `indices` and `weights` `[T, topk]` (T may
    /// be 0 and differ between ranks). The handle holds what this rank received.
    pub fn dispatch<T: WeftType>(
        &self,
        x: &[T],
        indices: &[i32],
        weights: &[f32],
        topk: usize,
    ) -> Result<MoeHandle<'_>> {
        self.check_dtype::<T>("x")?;
        if topk == 0 || !indices.len().is_multiple_of(topk) {
            return Err(Error::invalid(format!(
                "dispatch: indices hold {} values, expected [T, topk = {topk}]",
                indices.len()
            )));
        }
        let tokens = indices.len() / topk;
        expect_len("dispatch: weights", weights.len(), indices.len(), "[T, topk]")?;
        expect_len("dispatch: x", x.len(), tokens * self.hidden, "[T, H]")?;
        let shape = dims(tokens, self.hidden);
        let t = host_tensor(x.as_ptr(), &shape);
        let mut raw = ptr::null_mut();
        // SAFETY: x, indices and weights are live host arrays of the sizes checked above.
        check(unsafe {
            sys::weft_moe_dispatch(
                self.raw,
                &t,
                indices.as_ptr(),
                weights.as_ptr(),
                tokens,
                to_c_int(topk, "topk")?,
                ptr::null_mut(),
                &mut raw,
            )
        })?;
        let mut received = sys::WEFT_MOE_RECEIVED_INIT;
        // SAFETY: raw is the handle just made; received is a valid out-struct.
        let st = unsafe { sys::weft_moe_handle_received(raw, &mut received) };
        let handle =
            MoeHandle { raw, received, tokens, topk, hidden: self.hidden, dtype: self.dtype, _moe: PhantomData };
        check(st)?;
        Ok(handle)
    }

    /// `weft_moe_combine`, collective: `expert_out` `[rows, H]` in the received layout; `out`
    /// `[T, H]` gets per token the (weighted, or with `weighted` false plain) sum of its slots.
    pub fn combine<T: WeftType>(
        &self,
        handle: &MoeHandle<'_>,
        expert_out: &[T],
        weighted: bool,
        out: &mut [T],
    ) -> Result<()> {
        self.check_dtype::<T>("expert_out")?;
        expect_len("combine: expert_out", expert_out.len(), handle.rows() * self.hidden, "[rows, H]")?;
        expect_len("combine: out", out.len(), handle.tokens * self.hidden, "[T, H]")?;
        let (es, os) = (dims(handle.rows(), self.hidden), dims(handle.tokens, self.hidden));
        let (e, o) = (host_tensor(expert_out.as_ptr(), &es), host_tensor(out.as_mut_ptr() as *const T, &os));
        // SAFETY: both arrays are live host memory of the checked sizes; out is borrowed mutably.
        check(unsafe { sys::weft_moe_combine(self.raw, handle.raw, &e, weighted as c_int, &o, ptr::null_mut()) })
    }

    /// `weft_moe_combine_backward`, collective: from `grad_out` `[T, H]`, writes
    /// `grad_expert_out` `[rows, H]` and `grad_weights` `[T, topk]`.
    pub fn combine_backward<T: WeftType>(
        &self,
        handle: &MoeHandle<'_>,
        grad_out: &[T],
        grad_expert_out: &mut [T],
        grad_weights: &mut [f32],
    ) -> Result<()> {
        self.check_dtype::<T>("grad_out")?;
        expect_len("combine_backward: grad_out", grad_out.len(), handle.tokens * self.hidden, "[T, H]")?;
        expect_len(
            "combine_backward: grad_expert_out",
            grad_expert_out.len(),
            handle.rows() * self.hidden,
            "[rows, H]",
        )?;
        let (gs, es) = (dims(handle.tokens, self.hidden), dims(handle.rows(), self.hidden));
        let g = host_tensor(grad_out.as_ptr(), &gs);
        let e = host_tensor(grad_expert_out.as_mut_ptr() as *const T, &es);
        expect_len("combine_backward: grad_weights", grad_weights.len(), handle.tokens * handle.topk, "[T, topk]")?;
        // SAFETY: the arrays are live host memory of the checked sizes.
        check(unsafe {
            sys::weft_moe_combine_backward(self.raw, handle.raw, &g, &e, grad_weights.as_mut_ptr(), ptr::null_mut())
        })
    }

    /// `weft_moe_destroy`, reporting its error (dropping destroys too, silently).
    pub fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: raw is live and no longer reachable from self.
        check(unsafe { sys::weft_moe_destroy(raw) })
    }
}

impl Drop for Moe<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: raw is live; nothing uses it after this.
            unsafe { sys::weft_moe_destroy(self.raw) };
        }
    }
}

/// What one dispatch delivered on this rank (`weft_moe_handle_t` with its
/// `weft_moe_received_t`), kept for combine and the backward passes; dropping it destroys it.
/// Rows are grouped by local expert (expert-major; within an expert by source rank, token,
/// slot), padded per `expert_alignment`.
pub struct MoeHandle<'m> {
    raw: sys::weft_moe_handle_t,
    received: sys::weft_moe_received_t,
    tokens: usize,
    topk: usize,
    hidden: usize,
    dtype: Dtype,
    _moe: PhantomData<&'m ()>,
}

/// A slice over weft-owned memory (empty when the pointer is NULL or the length 0).
fn view<'h, T>(p: *const T, len: usize) -> &'h [T] {
    if p.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: moe.h: the arrays are host memory valid until the handle is destroyed, of the
        // lengths given by rows and local_experts; the borrow is tied to the handle.
        unsafe { std::slice::from_raw_parts(p, len) }
    }
}

impl MoeHandle<'_> {
    /// The raw `weft_moe_handle_t` (owned by this value).
    pub fn as_raw(&self) -> sys::weft_moe_handle_t {
        self.raw
    }

    /// T of the dispatch that made this handle (tokens sent from this rank).
    pub fn tokens_sent(&self) -> usize {
        self.tokens
    }

    /// Rows received (padding included).
    pub fn rows(&self) -> usize {
        self.received.rows
    }

    /// The received rows `[rows, H]`, row-major (zeros on padding rows).
    pub fn received<T: WeftType>(&self) -> Result<&[T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!("received tokens are {:?}, asked for {:?}", self.dtype, T::DTYPE)));
        }
        let t = &self.received.tokens;
        if t.data.is_null() {
            return Ok(&[]);
        }
        // SAFETY: moe.h: data + byte_offset is the first received row, inside weft's allocation.
        let first = unsafe { (t.data as *const u8).add(t.byte_offset as usize) } as *const T;
        Ok(view(first, self.rows() * self.hidden))
    }

    /// The experts this rank holds, in index order.
    pub fn local_experts(&self) -> &[i32] {
        view(self.received.experts, self.received.local_experts.max(0) as usize)
    }

    /// Rows per local expert (before padding).
    pub fn counts(&self) -> &[i64] {
        view(self.received.counts, self.received.local_experts.max(0) as usize)
    }

    /// First row of each local expert, then `rows` (L + 1 values).
    pub fn offsets(&self) -> &[i64] {
        view(self.received.offsets, self.received.local_experts.max(0) as usize + 1)
    }

    /// Per row its global expert (-1 on padding).
    pub fn row_expert(&self) -> &[i32] {
        view(self.received.row_expert, self.rows())
    }

    /// Per row its routing weight (0 on padding).
    pub fn row_weight(&self) -> &[f32] {
        view(self.received.row_weight, self.rows())
    }

    /// Per row the rank that sent it.
    pub fn row_source_rank(&self) -> &[i32] {
        view(self.received.row_source_rank, self.rows())
    }

    /// Per row the token's index on its source rank.
    pub fn row_source_token(&self) -> &[i64] {
        view(self.received.row_source_token, self.rows())
    }

    /// `weft_moe_handle_destroy`, reporting its error.
    pub fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: raw is live and no longer reachable from self.
        check(unsafe { sys::weft_moe_handle_destroy(raw) })
    }
}

impl Drop for MoeHandle<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: raw is live; the slices borrowed from it ended with &self's borrows.
            unsafe { sys::weft_moe_handle_destroy(self.raw) };
        }
    }
}
