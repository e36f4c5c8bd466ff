//! Safe Rust binding of libweft, the distributed deep-learning backend.
//!
//! It talks only to weft's C ABI (`weft.h`, through the [`weft_sys`] crate):
//!
//! * [`Comm`]: a communicator, made from the launcher's environment ([`Comm::from_env`]) or a
//!   [`UniqueId`] ([`Comm::init`]); dropping it destroys it.
//! * Collectives over slices of any [`WeftType`] (`f32`, `f64`, `i8`, `u8`, `i32`, `u32`,
//!   `i64`, `u64`, [`F16`], [`Bf16`]), blocking as `Comm` methods, asynchronous inside
//!   [`Comm::scope`] as [`Request`]s that hold the buffers' borrows.
//! * Errors as [`Error`]: a [`Status`] and the library's message (`weft_last_error`).
//! * Device meshes and sharded tensors (`weft/mesh.h`): [`Mesh`] (with [`MeshComm`]s per set of
//!   dims), [`Placement`] layouts, [`ShardedTensor`] over borrowed slices or [`TensorView`]s,
//!   [`redistribute`] (asynchronously: [`Scope::redistribute`]), [`plan`], [`full`], and
//!   distributed checkpoints ([`checkpoint::save`], [`checkpoint::load`], [`Checkpoint`]).
//! * Training parallelism (`weft/training.h`): the gradient [`Bucketer`] (data parallelism),
//!   [`Zero`] (ZeRO stages 0-3 with a fused optimizer), Megatron's regions ([`region_apply`])
//!   and context parallelism's [`ring_shift`].
//!
//! ```no_run
//! fn main() -> weft::Result<()> {
//!     let comm = weft::Comm::from_env()?; // launched with: weftrun -n 4 ./prog
//!     let mut x = vec![comm.rank() as f32; 4];
//!     comm.allreduce_in_place(&mut x, weft::Op::Sum)?;
//!     println!("rank {} of {}: {:?}", comm.rank(), comm.size(), x);
//!     Ok(())
//! }
//! ```
//!
//! Thread safety follows weft.h: a communicator and its requests are used by one thread at a
//! time (`Comm` is `Send`, not `Sync`); [`AbortHandle`] may abort it from any thread.

mod bucketer;
pub mod checkpoint;
mod comm;
mod error;
mod mesh;
mod request;
mod sharded;
mod training;
mod types;
mod zero;

pub use weft_sys as sys;

pub use comm::{AbortHandle, Comm, Config, P2POp, UniqueId};
pub use error::{last_error, status_string, Error, Result, Status};
pub use request::{Request, Scope};
pub use types::{Bf16, Dtype, Op, Transport, WeftType, F16};

pub use bucketer::{Bucketer, BucketerConfig, BucketerStats, Reduction};
pub use checkpoint::{Checkpoint, CheckpointConfig, TensorInfo};
pub use mesh::{LocalBox, Mesh, MeshComm, Placement};
pub use sharded::{
    full, plan, redistribute, redistribute_on_stream, Device, LocalView, ShardedTensor, Step, StepKind, TensorView,
};
pub use training::{
    region_apply, region_apply_in_place, region_apply_on_stream, ring_shift, ring_shift_on_stream, Region, Wire,
};
pub use zero::{Optimizer, OptimizerConfig, StepInfo, Zero, ZeroConfig, ZeroGather, ZeroMemory};

/// Version of the loaded library (`weft_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// ABI version of the loaded library; [`sys::WEFT_ABI_VERSION`] is the one this binding
    /// was written for.
    pub abi: u32,
}

/// `weft_version`: the loaded library's version and ABI version.
pub fn version() -> Result<Version> {
    let (mut code, mut abi) = (0, 0);
    // SAFETY: valid out-pointers.
    error::check(unsafe { sys::weft_version(&mut code, &mut abi) })?;
    let code = code.max(0) as u32;
    Ok(Version { major: code / 10000, minor: code / 100 % 100, patch: code % 100, abi: abi.max(0) as u32 })
}

#[cfg(test)]
mod mesh_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod training_tests;
