//! Distributed checkpoints (`weft/mesh.h`, last part): [`save`], [`load`] and the
//! [`Checkpoint`] inspector. A checkpoint is a directory with one data file per writing rank
//! and an index (`index.weft`); save on one mesh, load on another.
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use weft_sys as sys;

use crate::comm::Comm;
use crate::error::{check, Error, Result};
use crate::sharded::ShardedTensor;
use crate::types::Dtype;

/// Checkpoint options (`weft_checkpoint_config_t`); the default is `WEFT_CHECKPOINT_CONFIG_INIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// fsync every file and the directory before the index is renamed into place (default
    /// `true`); `false` for tests and tmpfs.
    pub fsync: bool,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig { fsync: true }
    }
}

impl CheckpointConfig {
    fn raw(config: Option<&CheckpointConfig>) -> sys::weft_checkpoint_config_t {
        let mut c = sys::WEFT_CHECKPOINT_CONFIG_INIT;
        if let Some(cfg) = config {
            c.fsync = cfg.fsync as c_int;
        }
        c
    }
}

fn path_c(p: &Path, what: &str) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::invalid(format!("{what} {} contains a NUL byte", p.display())))
}

fn names_c<'n>(names: impl Iterator<Item = &'n str>) -> Result<(Vec<CString>, Vec<*const c_char>)> {
    let owned = names
        .map(|n| CString::new(n).map_err(|_| Error::invalid(format!("tensor name {n:?} contains a NUL byte"))))
        .collect::<Result<Vec<_>>>()?;
    let ptrs = owned.iter().map(|n| n.as_ptr()).collect();
    Ok((owned, ptrs))
}

/// `weft_checkpoint_save`, collective over `comm` (the communicator the tensors' meshes were
/// made from): writes the tensors this rank holds, under their names, into directory `dir`
/// (created when missing). The set may differ by rank; a tensor held by several ranks has the
/// same name, global shape and dtype on each. Atomic: an interrupted save leaves the previous
/// checkpoint loadable. `config` `None`: defaults (fsync on).
pub fn save(
    comm: &Comm,
    dir: impl AsRef<Path>,
    tensors: &[(&str, &ShardedTensor<'_>)],
    config: Option<&CheckpointConfig>,
) -> Result<()> {
    let d = path_c(dir.as_ref(), "checkpoint directory")?;
    let (_owned, names) = names_c(tensors.iter().map(|(n, _)| *n))?;
    let handles: Vec<sys::weft_sharded_t> = tensors.iter().map(|(_, t)| t.as_raw()).collect();
    let cfg = CheckpointConfig::raw(config);
    // SAFETY: every pointer is valid for the call; the tensors are borrowed shared.
    check(unsafe {
        sys::weft_checkpoint_save(
            comm.as_raw(),
            d.as_ptr(),
            if names.is_empty() { ptr::null() } else { names.as_ptr() },
            if handles.is_empty() { ptr::null() } else { handles.as_ptr() },
            handles.len(),
            &cfg,
        )
    })
}

/// `weft_checkpoint_load`, not collective: fills each tensor's local memory (any layout, any
/// mesh) with the values stored under its name, reading only the boxes this rank needs. Errors
/// name the file and tensor (missing tensor, other shape or dtype, corrupt index, truncated
/// file, checksum mismatch).
pub fn load(dir: impl AsRef<Path>, tensors: &mut [(&str, &mut ShardedTensor<'_>)]) -> Result<()> {
    let d = path_c(dir.as_ref(), "checkpoint directory")?;
    let (_owned, names) = names_c(tensors.iter().map(|(n, _)| *n))?;
    for (n, t) in tensors.iter() {
        if !t.is_descriptor() && !t.is_writable() {
            return Err(Error::invalid(format!("load: the local memory of {n:?} is read-only")));
        }
    }
    let handles: Vec<sys::weft_sharded_t> = tensors.iter().map(|(_, t)| t.as_raw()).collect();
    let cfg = CheckpointConfig::raw(None);
    // SAFETY: every pointer is valid for the call; the tensors are borrowed mutably.
    check(unsafe {
        sys::weft_checkpoint_load(
            d.as_ptr(),
            if names.is_empty() { ptr::null() } else { names.as_ptr() },
            if handles.is_empty() { ptr::null() } else { handles.as_ptr() },
            handles.len(),
            &cfg,
        )
    })
}

/// One tensor of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name in the checkpoint.
    pub name: String,
    /// `None` for a dtype this binding does not know.
    pub dtype: Option<Dtype>,
    /// The global shape.
    pub shape: Vec<usize>,
    /// Number of stored shards (replicated pieces are stored once).
    pub nshards: usize,
}

/// An opened checkpoint index (`weft_checkpoint_open`), for inspection; dropping it closes it.
///
/// ```no_run
/// # fn f() -> weft::Result<()> {
/// let ck = weft::Checkpoint::open("ckpt")?;
/// for t in ck.tensors()? {
///     println!("{} {:?} {:?} ({} shards)", t.name, t.dtype, t.shape, t.nshards);
/// }
/// ck.verify()?;
/// ck.export_safetensors("model.safetensors")?;
/// # Ok(()) }
/// ```
pub struct Checkpoint {
    raw: sys::weft_checkpoint_t,
}

// SAFETY: the handle is plain data read by one thread at a time (&mut-free API, no Sync).
unsafe impl Send for Checkpoint {}

impl Checkpoint {
    /// Reads and verifies `dir`'s index.
    pub fn open(dir: impl AsRef<Path>) -> Result<Checkpoint> {
        let d = path_c(dir.as_ref(), "checkpoint directory")?;
        let mut raw: sys::weft_checkpoint_t = ptr::null_mut();
        // SAFETY: valid pointers.
        check(unsafe { sys::weft_checkpoint_open(d.as_ptr(), &mut raw) })?;
        Ok(Checkpoint { raw })
    }

    /// `weft_checkpoint_count`: number of tensors.
    pub fn len(&self) -> Result<usize> {
        let mut n = 0usize;
        // SAFETY: self.raw is live.
        check(unsafe { sys::weft_checkpoint_count(self.raw, &mut n) })?;
        Ok(n)
    }

    /// True when the checkpoint holds no tensors.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// `weft_checkpoint_tensor`: tensor `i`.
    pub fn tensor(&self, i: usize) -> Result<TensorInfo> {
        let mut name: *const c_char = ptr::null();
        let (mut dtype, mut ndim) = (0 as sys::weft_dtype_t, 0 as c_int);
        let mut shape = [0i64; sys::WEFT_TENSOR_MAX_DIMS];
        let mut nshards = 0usize;
        // SAFETY: self.raw is live; shape has room for WEFT_TENSOR_MAX_DIMS; the name is owned by
        // the handle and copied at once.
        check(unsafe {
            sys::weft_checkpoint_tensor(self.raw, i, &mut name, &mut dtype, &mut ndim, shape.as_mut_ptr(), &mut nshards)
        })?;
        let nd = (ndim.max(0) as usize).min(sys::WEFT_TENSOR_MAX_DIMS);
        Ok(TensorInfo {
            name: if name.is_null() {
                String::new()
            } else {
                unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
            },
            dtype: Dtype::from_raw(dtype),
            shape: shape[..nd].iter().map(|&v| v.max(0) as usize).collect(),
            nshards,
        })
    }

    /// Every tensor, in index order.
    pub fn tensors(&self) -> Result<Vec<TensorInfo>> {
        (0..self.len()?).map(|i| self.tensor(i)).collect()
    }

    /// `weft_checkpoint_verify`: reads every shard and checks its length and CRC-32C; the error
    /// names the first bad file and tensor.
    pub fn verify(&self) -> Result<()> {
        // SAFETY: self.raw is live.
        check(unsafe { sys::weft_checkpoint_verify(self.raw) })
    }

    /// `weft_checkpoint_export_safetensors`: the whole checkpoint as one safetensors file.
    pub fn export_safetensors(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path_c(path.as_ref(), "safetensors path")?;
        // SAFETY: self.raw is live; valid path.
        check(unsafe { sys::weft_checkpoint_export_safetensors(self.raw, p.as_ptr()) })
    }

    /// `weft_checkpoint_close`, reporting errors (dropping does the same silently).
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: raw is live and ours.
        check(unsafe { sys::weft_checkpoint_close(raw) })
    }
}

impl Drop for Checkpoint {
    fn drop(&mut self) {
        // SAFETY: self.raw is live and ours.
        unsafe { sys::weft_checkpoint_close(self.raw) };
    }
}

impl fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checkpoint").field("tensors", &self.len().ok()).finish()
    }
}
