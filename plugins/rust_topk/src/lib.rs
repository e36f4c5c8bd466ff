//! weft plugin `rust_topk`: the gradient codec "topk" (weft/plugin.h, CODEC_* entries), top-k
//! sparsification for the bucketer's and ZeRO's compressed wires (weft/training.h). std only.
//!
//! Of `count` float32 values it keeps k = ceil(count / 16) (a pure function of count: every
//! rank sizes every other rank's chunk with `topk.bytes`), those of the largest magnitude; equal
//! magnitudes go to the lower index, and NaN counts as larger than any number (f32::total_cmp on
//! |x|), so an overflowed gradient stays visible to a loss scaler. The bytes:
//!
//!   u32 count, then k pairs (u32 index, f32 value) in ascending index order, all little-endian.
//!
//! Decoding writes zeros and the kept values at their indices. The values kept are the inputs'
//! own bits, so decode(encode(x)) loses exactly the values not kept: with the bucketer's error
//! feedback those are added to the next step's gradient, and nothing is lost in the long run.
//!
//! Return values (weft's status numbers): 1 (INVALID_ARGUMENT) for bytes that are not an
//! encoding of `count` values, 2 (UNSUPPORTED) for a count above u32::MAX, 9 (INTERNAL) for a
//! panic, which catch_unwind stops at the C boundary.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One value of every KEEP_ONE_IN is kept.
pub const KEEP_ONE_IN: usize = 16;
const HEADER: usize = 4;
const PAIR: usize = 8;

const INVALID_ARGUMENT: i32 = 1;
const UNSUPPORTED: i32 = 2;
const INTERNAL: i32 = 9;

/// How many of `count` values are kept: ceil(count / 16) (1 for 1..=16, 0 for 0).
pub fn kept(count: usize) -> usize {
    count.div_ceil(KEEP_ONE_IN)
}

/// Bytes of an encoding of `count` values.
pub fn bytes(count: usize) -> usize {
    HEADER + PAIR * kept(count)
}

/// The indices of the values kept, ascending: the k largest |x|, ties to the lower index.
pub fn select(values: &[f32]) -> Vec<u32> {
    let k = kept(values.len());
    let mut idx: Vec<u32> = (0..values.len() as u32).collect();
    // A strict total order (indices differ), so the selection does not depend on the algorithm.
    let larger_first = |a: &u32, b: &u32| {
        let (ma, mb) = (values[*a as usize].abs(), values[*b as usize].abs());
        mb.total_cmp(&ma).then(a.cmp(b))
    };
    if k < idx.len() {
        idx.select_nth_unstable_by(k, larger_first);
        idx.truncate(k);
    }
    idx.sort_unstable();
    idx
}

/// Encodes `values` into `out` (exactly bytes(values.len()) bytes).
pub fn encode(values: &[f32], out: &mut [u8]) -> Result<(), i32> {
    let count = u32::try_from(values.len()).map_err(|_| UNSUPPORTED)?;
    if out.len() != bytes(values.len()) {
        return Err(INVALID_ARGUMENT);
    }
    out[..HEADER].copy_from_slice(&count.to_le_bytes());
    for (pair, &i) in out[HEADER..].chunks_exact_mut(PAIR).zip(select(values).iter()) {
        pair[..4].copy_from_slice(&i.to_le_bytes());
        pair[4..].copy_from_slice(&values[i as usize].to_le_bytes());
    }
    Ok(())
}

/// Decodes `input` (bytes(out.len()) bytes) into `out`: zeros and the kept values. Refuses a
/// count other than out.len(), an index out of range and indices not strictly ascending.
pub fn decode(input: &[u8], out: &mut [f32]) -> Result<(), i32> {
    if input.len() != bytes(out.len()) {
        return Err(INVALID_ARGUMENT);
    }
    let count = u32::from_le_bytes(input[..HEADER].try_into().map_err(|_| INTERNAL)?);
    if count as usize != out.len() {
        return Err(INVALID_ARGUMENT);
    }
    out.fill(0.0);
    let mut next = 0usize; // the lowest index the next pair may have
    for pair in input[HEADER..].chunks_exact(PAIR) {
        let i = u32::from_le_bytes(pair[..4].try_into().map_err(|_| INTERNAL)?) as usize;
        if i < next || i >= out.len() {
            return Err(INVALID_ARGUMENT);
        }
        out[i] = f32::from_le_bytes(pair[4..].try_into().map_err(|_| INTERNAL)?);
        next = i + 1;
    }
    Ok(())
}

/// Runs f, turning a panic into INTERNAL: a panic must not unwind into weft's C++ frames.
pub fn guard<F: FnOnce() -> i32>(f: F) -> i32 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(INTERNAL)
}

/// A slice from a C pointer; an empty one needs no valid pointer (weft may pass NULL then).
unsafe fn slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 { &[] } else { std::slice::from_raw_parts(p, n) }
}

unsafe fn slice_mut<'a, T>(p: *mut T, n: usize) -> &'a mut [T] {
    if n == 0 { &mut [] } else { std::slice::from_raw_parts_mut(p, n) }
}

// ------------------------------------------------------------------ the C entries

/// CODEC_BYTES, SIZE(SIZE).
#[no_mangle]
pub extern "C" fn weft_topk_bytes(count: usize) -> usize {
    catch_unwind(|| bytes(count)).unwrap_or(0)
}

/// CODEC_ENCODE, I32(PTR, SIZE, PTR): src holds count float32, dst bytes(count) bytes.
///
/// # Safety
/// weft's contract (weft/plugin.h): src and dst are valid for those sizes.
#[no_mangle]
pub unsafe extern "C" fn weft_topk_encode(src: *const f32, count: usize, dst: *mut c_void) -> i32 {
    guard(|| {
        if count > u32::MAX as usize {
            return UNSUPPORTED;
        }
        let values = slice(src, count);
        let out = slice_mut(dst.cast::<u8>(), bytes(count));
        encode(values, out).err().unwrap_or(0)
    })
}

/// CODEC_DECODE, I32(PTR, SIZE, PTR): src holds bytes(count) bytes, dst count float32.
///
/// # Safety
/// weft's contract (weft/plugin.h): src and dst are valid for those sizes.
#[no_mangle]
pub unsafe extern "C" fn weft_topk_decode(src: *const c_void, count: usize, dst: *mut f32) -> i32 {
    guard(|| {
        if count > u32::MAX as usize {
            return UNSUPPORTED;
        }
        let input = slice(src.cast::<u8>(), bytes(count));
        let out = slice_mut(dst, count);
        decode(input, out).err().unwrap_or(0)
    })
}

/// FUNCTION `topk.kept`, SIZE(SIZE): k for count values (for callers by name).
#[no_mangle]
pub extern "C" fn weft_topk_kept(count: usize) -> usize {
    catch_unwind(|| kept(count)).unwrap_or(0)
}

/// The manifest (manifest.json turned into FlatBuffers bytes by the CMake build, which passes its
/// path in WEFT_RUST_TOPK_MANIFEST).
static MANIFEST: &[u8] = include_bytes!(env!("WEFT_RUST_TOPK_MANIFEST"));

/// const void *weft_plugin_manifest(size_t *size).
///
/// # Safety
/// size is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn weft_plugin_manifest(size: *mut usize) -> *const c_void {
    if !size.is_null() {
        *size = MANIFEST.len();
    }
    MANIFEST.as_ptr().cast()
}

#[cfg(test)]
mod tests;
