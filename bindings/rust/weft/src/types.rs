//! Element types, reduction operators, and the `F16`/`Bf16` newtypes.
use std::cmp::Ordering;
use std::fmt;

use weft_sys as sys;

use crate::error::{check, Error, Result};

/// `weft_dtype_t`. Collectives pick it from the element type ([`WeftType::DTYPE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// `double`.
    F64,
    /// `float`.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16: the upper 16 bits of binary32.
    Bf16,
    /// OCP FP8 E4M3 (no Rust element type yet; usable through `weft-sys`).
    Fp8E4M3,
    /// OCP FP8 E5M2 (no Rust element type yet; usable through `weft-sys`).
    Fp8E5M2,
    /// `int8_t`.
    I8,
    /// `uint8_t`.
    U8,
    /// `int32_t`.
    I32,
    /// `uint32_t`.
    U32,
    /// `int64_t`.
    I64,
    /// `uint64_t`.
    U64,
}

impl Dtype {
    /// Every dtype, in C enum order.
    pub const ALL: [Dtype; 12] = [
        Dtype::F64,
        Dtype::F32,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::Fp8E4M3,
        Dtype::Fp8E5M2,
        Dtype::I8,
        Dtype::U8,
        Dtype::I32,
        Dtype::U32,
        Dtype::I64,
        Dtype::U64,
    ];

    /// The C value.
    pub fn raw(self) -> sys::weft_dtype_t {
        match self {
            Dtype::F64 => sys::WEFT_FLOAT64,
            Dtype::F32 => sys::WEFT_FLOAT32,
            Dtype::F16 => sys::WEFT_FLOAT16,
            Dtype::Bf16 => sys::WEFT_BFLOAT16,
            Dtype::Fp8E4M3 => sys::WEFT_FP8_E4M3,
            Dtype::Fp8E5M2 => sys::WEFT_FP8_E5M2,
            Dtype::I8 => sys::WEFT_INT8,
            Dtype::U8 => sys::WEFT_UINT8,
            Dtype::I32 => sys::WEFT_INT32,
            Dtype::U32 => sys::WEFT_UINT32,
            Dtype::I64 => sys::WEFT_INT64,
            Dtype::U64 => sys::WEFT_UINT64,
        }
    }

    /// Bytes per element, as the library reports it (`weft_dtype_size`).
    pub fn size(self) -> Result<usize> {
        let mut size = 0usize;
        // SAFETY: size is a valid out-pointer for the duration of the call.
        check(unsafe { sys::weft_dtype_size(self.raw(), &mut size) })?;
        Ok(size)
    }
}

/// `weft_op_t`. See weft.h for the reduction rules (16-bit floats reduce in f32, integers wrap,
/// `Avg` truncates for integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum (NaN if any operand is NaN).
    Min,
    /// Maximum (NaN if any operand is NaN).
    Max,
    /// Sum divided by the number of ranks.
    Avg,
    /// A user or plugin operator by its id (>= `WEFT_PLUGIN_ID_BASE`): [`UserOp::op`](crate::UserOp::op),
    /// or a REDUCE_OP [`PluginEntry::op`](crate::PluginEntry::op).
    Custom(sys::weft_op_t),
}

impl Op {
    /// The C value (`weft_op_t`).
    pub fn raw(self) -> sys::weft_op_t {
        match self {
            Op::Sum => sys::WEFT_SUM,
            Op::Prod => sys::WEFT_PROD,
            Op::Min => sys::WEFT_MIN,
            Op::Max => sys::WEFT_MAX,
            Op::Avg => sys::WEFT_AVG,
            Op::Custom(id) => id,
        }
    }
}

/// `weft_transport_t`: transport preference for host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transport {
    /// UCX picks shared memory, CMA, TCP, IB: whatever reaches the peer.
    #[default]
    Auto,
    /// UCX only.
    Ucx,
}

impl Transport {
    /// The C value (`weft_transport_t`).
    pub fn raw(self) -> sys::weft_transport_t {
        match self {
            Transport::Auto => sys::WEFT_TRANSPORT_AUTO,
            Transport::Ucx => sys::WEFT_TRANSPORT_UCX,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Element types the collectives accept. Sealed: implemented for `f32`, `f64`, `i8`, `u8`,
/// `i32`, `u32`, `i64`, `u64`, [`F16`] and [`Bf16`] only, each with its weft dtype, so a
/// buffer's element size always matches the dtype the library is told.
pub trait WeftType: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The weft dtype of this Rust type.
    const DTYPE: Dtype;
}

macro_rules! weft_type {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl WeftType for $t { const DTYPE: Dtype = Dtype::$d; }
    )*};
}
weft_type!(f64 => F64, f32 => F32, F16 => F16, Bf16 => Bf16, i8 => I8, u8 => U8,
           i32 => I32, u32 => U32, i64 => I64, u64 => U64);

/// IEEE 754 binary16, stored as its bits. Conversions round to nearest, ties to even.
/// Equality and ordering are numeric (NaN is unequal to itself, -0 == +0).
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct F16(u16);

/// bfloat16 (the upper half of an f32), stored as its bits. Conversions from f32 round to
/// nearest, ties to even. Equality and ordering are numeric.
#[derive(Clone, Copy, Default)]
#[repr(transparent)]
pub struct Bf16(u16);

impl F16 {
    /// 0.0.
    pub const ZERO: F16 = F16(0);
    /// 1.0.
    pub const ONE: F16 = F16(0x3c00);
    /// The largest finite value, 65504.
    pub const MAX: F16 = F16(0x7bff);
    /// Positive infinity.
    pub const INFINITY: F16 = F16(0x7c00);
    /// A quiet NaN.
    pub const NAN: F16 = F16(0x7e00);

    /// The value of the given IEEE binary16 bits.
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }
    /// The IEEE binary16 bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// Rounds to the nearest binary16 (ties to even); overflow gives infinity, NaN stays NaN.
    pub fn from_f32(x: f32) -> F16 {
        let b = x.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let exp = ((b >> 23) & 0xff) as i32;
        let man = b & 0x7f_ffff;
        if exp == 0xff {
            // Infinity, or NaN (quiet, keeping the payload's top bits).
            return F16(if man == 0 { sign | 0x7c00 } else { sign | 0x7e00 | (man >> 13) as u16 });
        }
        let e = exp - 127 + 15; // biased binary16 exponent
        if e >= 0x1f {
            return F16(sign | 0x7c00);
        }
        if e >= 1 {
            let mut h = ((e as u32) << 10) | (man >> 13);
            let rest = man & 0x1fff;
            if rest > 0x1000 || (rest == 0x1000 && (h & 1) == 1) {
                h += 1; // a carry into the exponent is right, up to infinity
            }
            return F16(sign | h as u16);
        }
        // Subnormal or zero in binary16: value / 2^-24 = m * 2^(exp - 126).
        let m = if exp == 0 { man } else { man | 0x80_0000 };
        let shift = (126 - exp.max(1)) as u32;
        if shift >= 25 {
            return F16(sign);
        }
        let mut q = m >> shift;
        let rest = m & ((1u32 << shift) - 1);
        let half = 1u32 << (shift - 1);
        if rest > half || (rest == half && (q & 1) == 1) {
            q += 1;
        }
        F16(sign | q as u16)
    }

    /// Exact.
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = if exp == 0 {
            if man == 0 {
                sign
            } else {
                let v = man as f32 * (1.0 / 16_777_216.0); // man * 2^-24, exact
                return if sign != 0 { -v } else { v };
            }
        } else if exp == 0x1f {
            sign | 0x7f80_0000 | (man << 13)
        } else {
            sign | ((exp + 112) << 23) | (man << 13)
        };
        f32::from_bits(bits)
    }

    /// True for a NaN.
    pub fn is_nan(self) -> bool {
        (self.0 & 0x7c00) == 0x7c00 && (self.0 & 0x3ff) != 0
    }
}

impl Bf16 {
    /// 0.0.
    pub const ZERO: Bf16 = Bf16(0);
    /// 1.0.
    pub const ONE: Bf16 = Bf16(0x3f80);
    /// The largest finite value (about 3.39e38).
    pub const MAX: Bf16 = Bf16(0x7f7f);
    /// Positive infinity.
    pub const INFINITY: Bf16 = Bf16(0x7f80);
    /// A quiet NaN.
    pub const NAN: Bf16 = Bf16(0x7fc0);

    /// The value of the given bfloat16 bits (the upper half of a binary32).
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }
    /// The bfloat16 bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// Rounds to the nearest bfloat16 (ties to even); NaN stays NaN (quieted).
    pub fn from_f32(x: f32) -> Bf16 {
        let b = x.to_bits();
        if x.is_nan() {
            return Bf16(((b >> 16) as u16) | 0x0040);
        }
        let round = 0x7fff + ((b >> 16) & 1);
        Bf16((b.wrapping_add(round) >> 16) as u16)
    }

    /// Exact.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    /// True for a NaN.
    pub fn is_nan(self) -> bool {
        (self.0 & 0x7f80) == 0x7f80 && (self.0 & 0x7f) != 0
    }
}

macro_rules! half_impls {
    ($t:ident) => {
        impl From<$t> for f32 {
            fn from(x: $t) -> f32 {
                x.to_f32()
            }
        }
        impl From<$t> for f64 {
            fn from(x: $t) -> f64 {
                x.to_f32() as f64
            }
        }
        impl From<f32> for $t {
            /// Rounds to nearest, ties to even.
            fn from(x: f32) -> $t {
                $t::from_f32(x)
            }
        }
        impl PartialEq for $t {
            fn eq(&self, other: &$t) -> bool {
                self.to_f32() == other.to_f32()
            }
        }
        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &$t) -> Option<Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.to_f32())
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }
    };
}
half_impls!(F16);
half_impls!(Bf16);

/// Converts a length or rank to the C `int` the ABI takes.
pub(crate) fn to_c_int(v: usize, what: &str) -> Result<std::ffi::c_int> {
    std::ffi::c_int::try_from(v).map_err(|_| Error::invalid(format!("{what} = {v} does not fit a C int")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_every_value() {
        for bits in 0..=u16::MAX {
            let h = F16::from_bits(bits);
            let back = F16::from_f32(h.to_f32());
            if h.is_nan() {
                assert!(back.is_nan(), "{bits:#06x}");
            } else {
                assert_eq!(back.to_bits(), bits, "{bits:#06x}");
            }
        }
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        assert_eq!(F16::from_f32(1.0).to_bits(), 0x3c00);
        assert_eq!(F16::from_f32(-2.0).to_bits(), 0xc000);
        assert_eq!(F16::from_f32(65504.0).to_bits(), 0x7bff);
        assert_eq!(F16::from_f32(65519.0).to_bits(), 0x7bff); // below the halfway point
        assert_eq!(F16::from_f32(65520.0).to_bits(), 0x7c00); // halfway, rounds to "even" = inf
        assert_eq!(F16::from_f32(1e10).to_bits(), 0x7c00);
        assert_eq!(F16::from_f32(f32::NEG_INFINITY).to_bits(), 0xfc00);
        assert!(F16::from_f32(f32::NAN).is_nan());
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
        assert_eq!(F16::from_f32(1.0 + 2f32.powi(-11)).to_bits(), 0x3c00);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: rounds up.
        assert_eq!(F16::from_f32(1.0 + 3.0 * 2f32.powi(-11)).to_bits(), 0x3c02);
        // Subnormals: 2^-24 is the smallest; 2^-25 is a tie that goes to zero; just above goes up.
        assert_eq!(F16::from_f32(2f32.powi(-24)).to_bits(), 0x0001);
        assert_eq!(F16::from_f32(2f32.powi(-25)).to_bits(), 0x0000);
        assert_eq!(F16::from_f32(2f32.powi(-25) * 1.0001).to_bits(), 0x0001);
        assert_eq!(F16::from_f32(3.0 * 2f32.powi(-25)).to_bits(), 0x0002); // 1.5 ulp, tie -> even
        assert_eq!(F16::from_f32(-0.0).to_bits(), 0x8000);
        assert_eq!(F16::from_f32(2f32.powi(-14)).to_bits(), 0x0400); // smallest normal
        assert_eq!(F16::from_f32(2f32.powi(-14) - 2f32.powi(-25)).to_bits(), 0x0400); // rounds up into normal
        assert_eq!(F16::from_f32(1e-30).to_bits(), 0);
    }

    #[test]
    fn f16_matches_exact_rounding_on_a_sweep() {
        // Reference: pick the nearer of the two neighbouring binary16 values in f64.
        let mut x = 1e-9f32;
        while x < 70000.0 {
            let h = F16::from_f32(x);
            let v = h.to_f32() as f64;
            if v.is_finite() {
                let up = F16::from_bits(h.to_bits() + 1).to_f32() as f64;
                let down = if h.to_bits() > 0 { F16::from_bits(h.to_bits() - 1).to_f32() as f64 } else { 0.0 };
                let d = (x as f64 - v).abs();
                assert!(d <= (up - x as f64).abs() && d <= (x as f64 - down).abs(), "{x}");
            }
            x *= 1.000_37;
        }
    }

    #[test]
    fn bf16_conversions() {
        assert_eq!(Bf16::from_f32(1.0).to_bits(), 0x3f80);
        assert_eq!(Bf16::from_f32(3.0).to_f32(), 3.0);
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even (1.0); 1 + 3*2^-8 goes up.
        assert_eq!(Bf16::from_f32(1.0 + 2f32.powi(-8)).to_bits(), 0x3f80);
        assert_eq!(Bf16::from_f32(1.0 + 3.0 * 2f32.powi(-8)).to_bits(), 0x3f82);
        assert_eq!(Bf16::from_f32(f32::MAX).to_bits(), 0x7f80); // rounds to infinity
        assert!(Bf16::from_f32(f32::NAN).is_nan());
        for bits in 0..=u16::MAX {
            let b = Bf16::from_bits(bits);
            if !b.is_nan() {
                assert_eq!(Bf16::from_f32(b.to_f32()).to_bits(), bits);
            }
        }
    }

    #[test]
    fn numeric_equality() {
        assert_eq!(F16::from_bits(0x8000), F16::ZERO);
        assert_ne!(F16::NAN, F16::NAN);
        assert!(Bf16::ONE < Bf16::from_f32(2.0));
        assert_eq!(f32::from(F16::ONE), 1.0);
    }

    #[test]
    fn dtype_sizes_match_the_rust_types() {
        fn size_of_dtype<T: WeftType>() -> usize {
            T::DTYPE.size().unwrap()
        }
        assert_eq!(size_of_dtype::<f64>(), 8);
        assert_eq!(size_of_dtype::<f32>(), 4);
        assert_eq!(size_of_dtype::<F16>(), std::mem::size_of::<F16>());
        assert_eq!(size_of_dtype::<Bf16>(), std::mem::size_of::<Bf16>());
        assert_eq!(size_of_dtype::<i8>(), 1);
        assert_eq!(size_of_dtype::<u8>(), 1);
        assert_eq!(size_of_dtype::<i32>(), 4);
        assert_eq!(size_of_dtype::<u32>(), 4);
        assert_eq!(size_of_dtype::<i64>(), 8);
        assert_eq!(size_of_dtype::<u64>(), 8);
        assert_eq!(Dtype::Fp8E4M3.size().unwrap(), 1);
        for (i, d) in Dtype::ALL.iter().enumerate() {
            assert_eq!(d.raw(), i as i32);
        }
    }
}
