package weft

// #include <weft/weft.h>
import "C"

import (
	"math"
	"reflect"
)

// Dtype is a weft_dtype_t. Collectives take it from the slice's element type.
type Dtype int

const (
	DtypeFloat64  Dtype = C.WEFT_FLOAT64
	DtypeFloat32  Dtype = C.WEFT_FLOAT32
	DtypeFloat16  Dtype = C.WEFT_FLOAT16  // IEEE 754 binary16 (element type Float16)
	DtypeBFloat16 Dtype = C.WEFT_BFLOAT16 // bfloat16 (element type BFloat16)
	DtypeFP8E4M3  Dtype = C.WEFT_FP8_E4M3 // no Go element type yet
	DtypeFP8E5M2  Dtype = C.WEFT_FP8_E5M2 // no Go element type yet
	DtypeInt8     Dtype = C.WEFT_INT8
	DtypeUint8    Dtype = C.WEFT_UINT8
	DtypeInt32    Dtype = C.WEFT_INT32
	DtypeUint32   Dtype = C.WEFT_UINT32
	DtypeInt64    Dtype = C.WEFT_INT64
	DtypeUint64   Dtype = C.WEFT_UINT64
	NumDtypes           = C.WEFT_NUM_DTYPES
)

// Op is a reduction operator (weft_op_t); see weft.h for the rules (16-bit floats reduce in
// float32, integers wrap, OpAvg truncates for integers).
type Op int

const (
	OpSum  Op = C.WEFT_SUM
	OpProd Op = C.WEFT_PROD
	OpMin  Op = C.WEFT_MIN
	OpMax  Op = C.WEFT_MAX
	OpAvg  Op = C.WEFT_AVG
	NumOps    = C.WEFT_NUM_OPS
)

// Float16 is an IEEE 754 binary16 value, stored as its bits.
type Float16 uint16

// BFloat16 is a bfloat16 value (the upper half of a float32), stored as its bits.
type BFloat16 uint16

// Element is the constraint of the collectives' element types. Types defined over float32,
// float64 and the fixed-size integers are accepted too (the dtype follows the underlying
// type).
type Element interface {
	~float32 | ~float64 | ~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64 | Float16 | BFloat16
}

// DtypeOf returns the weft dtype of T.
func DtypeOf[T Element]() Dtype {
	var z T
	switch any(z).(type) {
	case Float16:
		return DtypeFloat16
	case BFloat16:
		return DtypeBFloat16
	}
	switch reflect.TypeOf(z).Kind() {
	case reflect.Float32:
		return DtypeFloat32
	case reflect.Float64:
		return DtypeFloat64
	case reflect.Int8:
		return DtypeInt8
	case reflect.Uint8:
		return DtypeUint8
	case reflect.Int32:
		return DtypeInt32
	case reflect.Uint32:
		return DtypeUint32
	case reflect.Int64:
		return DtypeInt64
	case reflect.Uint64:
		return DtypeUint64
	}
	panic("weft: unreachable element type")
}

// Float16From rounds f to the nearest binary16 (ties to even); overflow gives infinity, NaN
// stays NaN.
func Float16From(f float32) Float16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return Float16(sign | 0x7c00)
		}
		return Float16(sign | 0x7e00 | uint16(man>>13))
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return Float16(sign | 0x7c00)
	}
	if e >= 1 {
		h := uint32(e)<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++ // a carry into the exponent is right, up to infinity
		}
		return Float16(sign | uint16(h))
	}
	// Subnormal or zero: value / 2^-24 = m * 2^(exp-126).
	m := man
	if exp != 0 {
		m |= 0x800000
	} else {
		exp = 1
	}
	shift := uint32(126 - exp)
	if shift >= 25 {
		return Float16(sign)
	}
	q := m >> shift
	rest := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rest > half || (rest == half && q&1 == 1) {
		q++
	}
	return Float16(sign | uint16(q))
}

// Float32 converts exactly.
func (h Float16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		v := float32(man) * (1.0 / 16777216.0)
		if sign != 0 {
			return -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// IsNaN reports whether h is a NaN.
func (h Float16) IsNaN() bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// BFloat16From rounds f to the nearest bfloat16 (ties to even); NaN stays NaN.
func BFloat16From(f float32) BFloat16 {
	b := math.Float32bits(f)
	if f != f {
		return BFloat16(uint16(b>>16) | 0x40)
	}
	return BFloat16((b + 0x7fff + (b>>16)&1) >> 16)
}

// Float32 converts exactly.
func (h BFloat16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }

// IsNaN reports whether h is a NaN.
func (h BFloat16) IsNaN() bool { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }
