/*
 * weft/common.h - what every weft handle family shares: version, status codes and their words,
 * element types and reduction operators. Part of the C ABI of libweft.so; users include
 * <weft/weft.h>, which includes this header and one header per handle family.
 */
#ifndef WEFT_COMMON_H
#define WEFT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION_CODE (WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH)
/* Bumped on every incompatible ABI change; checked against weft_version()'s abi_version. */
#define WEFT_ABI_VERSION 1

typedef enum weft_status {
  WEFT_OK = 0,
  WEFT_ERR_INVALID_ARGUMENT = 1, /* a bad argument: NULL, out of range, bad enum, overlap */
  WEFT_ERR_UNSUPPORTED = 2,      /* valid request this build or transport cannot do */
  WEFT_ERR_OUT_OF_MEMORY = 3,
  WEFT_ERR_TIMEOUT = 4,          /* a deadline (config timeout / WEFT_TIMEOUT) expired */
  WEFT_ERR_REMOTE = 5,           /* a peer failed or disappeared; the message names its rank */
  WEFT_ERR_ABORTED = 6,          /* weft_comm_abort() was called on this communicator */
  WEFT_ERR_MISMATCH = 7,         /* ranks disagree (version, or op/count/dtype/root in check mode) */
  WEFT_ERR_TRANSPORT = 8,        /* the network/transport layer failed */
  WEFT_ERR_INTERNAL = 9,         /* a bug in weft: please report with weft_last_error() */
  WEFT_IN_PROGRESS = 10          /* weft_test(): not complete yet (not an error) */
} weft_status_t;

/* Static English name and short explanation of a status; never NULL. */
const char *weft_status_string(weft_status_t status);
/* Detailed message of the last failed weft call on this thread ("" if none). */
const char *weft_last_error(void);

/* Library version (WEFT_VERSION_CODE of the loaded library) and its ABI version. Either may be
 * NULL. */
weft_status_t weft_version(int *version_code, int *abi_version);

typedef enum weft_dtype {
  WEFT_FLOAT64 = 0,
  WEFT_FLOAT32 = 1,
  WEFT_FLOAT16 = 2,  /* IEEE 754 binary16 */
  WEFT_BFLOAT16 = 3, /* bfloat16: the upper 16 bits of binary32 */
  WEFT_FP8_E4M3 = 4, /* OCP FP8 E4M3 (no infinities, one NaN pattern per sign, max 448) */
  WEFT_FP8_E5M2 = 5, /* OCP FP8 E5M2 (IEEE-like, max finite 57344) */
  WEFT_INT8 = 6,
  WEFT_UINT8 = 7,
  WEFT_INT32 = 8,
  WEFT_UINT32 = 9,
  WEFT_INT64 = 10,
  WEFT_UINT64 = 11,
  WEFT_NUM_DTYPES = 12
} weft_dtype_t;

/*
 * Reduction rules.
 *  - FLOAT64/FLOAT32 reduce in their own type.
 *  - FLOAT16, BFLOAT16 and both FP8 types are widened to float32, reduced in float32 across all
 *    ranks (partial results travel between ranks as float32), and rounded ONCE to the
 *    destination type at the end (round-to-nearest-even). The float32 summation order depends
 *    on the algorithm, so results may differ from a sequential sum by float32 rounding only.
 *  - FP8 results saturate: a finite result beyond the type's range becomes +-max finite
 *    (448 for E4M3, 57344 for E5M2) instead of NaN/Inf; NaN inputs stay NaN; E5M2 infinite
 *    inputs stay infinite.
 *  - Integers wrap modulo 2^bits for SUM and PROD (two's complement for signed types).
 *  - AVG is SUM divided by the number of ranks: in float32/float64 for floating types, and
 *    integer division truncating toward zero for integer types (of the wrapped sum).
 *  - MIN/MAX of floats with a NaN operand yield NaN.
 */
typedef enum weft_op {
  WEFT_SUM = 0,
  WEFT_PROD = 1,
  WEFT_MIN = 2,
  WEFT_MAX = 3,
  WEFT_AVG = 4,
  WEFT_NUM_OPS = 5
} weft_op_t;

/* Size in bytes of one element of dtype (0 and WEFT_ERR_INVALID_ARGUMENT for a bad dtype). */
weft_status_t weft_dtype_size(weft_dtype_t dtype, size_t *size);

/* ------------------------------------------------------------------ tensor views */

#define WEFT_TENSOR_MAX_DIMS 8

/* Where a tensor's memory lives. The numbers are DLPack's DLDeviceType codes. */
typedef enum weft_device_type {
  WEFT_DEVICE_CPU = 1,      /* kDLCPU: host memory */
  WEFT_DEVICE_CUDA = 2,     /* kDLCUDA: CUDA device memory of GPU device_id */
  WEFT_DEVICE_CUDA_HOST = 3 /* kDLCUDAHost: pinned host memory (treated as host memory) */
} weft_device_type_t;

/*
 * A view of caller-owned memory, mapping field for field onto DLPack's DLTensor:
 *   data <- DLTensor.data, device_type/device_id <- DLTensor.device, ndim <- ndim,
 *   dtype <- DLTensor.dtype (a weft_dtype_t for the (code, bits, lanes=1) triple),
 *   shape <- shape, strides <- strides, byte_offset <- byte_offset.
 * Element i0..i(n-1) lives at (char *)data + byte_offset + sum(i_k * strides[k]) * element size.
 * Strides are in elements (as DLPack's) and may be any non-negative values; strides NULL means
 * contiguous row-major. A stride of 0 repeats one element along a dim (a broadcast): allowed in
 * a tensor weft only reads, refused (WEFT_ERR_INVALID_ARGUMENT) in one weft writes into. A view
 * with no elements (some extent 0) may have any strides. ndim is 0..WEFT_TENSOR_MAX_DIMS (0 = a scalar of one element). weft reads
 * the view during the call that takes it (a handle that keeps a view copies shape and strides).
 */
typedef struct weft_tensor {
  void *data;
  weft_device_type_t device_type;
  int device_id;
  int ndim;
  weft_dtype_t dtype;
  const int64_t *shape;
  const int64_t *strides;
  uint64_t byte_offset;
} weft_tensor_t;

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_H */
