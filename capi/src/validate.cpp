#include "capi/src/validate.h"

#include <cstdint>
#include <limits>

#include "capi/src/shim.h"
#include "core/collectives/custom_op.h"
#include "core/common/status.h"

namespace weft::capi {

DType check_dtype(const weft_dtype_t& dtype, const char* arg) {
  int d = enum_bits(dtype);
  if (!dtype_valid(d)) {
    fail(Status::invalid_argument, "%s %d is not a weft_dtype_t (expected 0..%d)", arg, d, kNumDTypes - 1);
  }
  return static_cast<DType>(d);
}

ReduceOp check_op(const weft_op_t& op, DType dtype) {
  int o = enum_bits(op);
  if (o >= plugin::kIdBase) {
    coll::custom_op_for(static_cast<ReduceOp>(o), dtype);  // throws naming the operator
    return static_cast<ReduceOp>(o);
  }
  if (!op_valid(o)) {
    fail(Status::invalid_argument, "op %d is not a weft_op_t (expected 0..%d, or %d and up from plugins and "
         "weft_op_create)", o, kNumReduceOps - 1, plugin::kIdBase);
  }
  return static_cast<ReduceOp>(o);
}

size_t check_bytes(size_t count, DType dtype, const char* what) {
  return check_bytes_times(count, 1, dtype, what);
}

size_t check_bytes_times(size_t count, size_t n, DType dtype, const char* what) {
  const size_t elem = dtype_size(dtype);
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, n, &bytes) || __builtin_mul_overflow(bytes, elem, &bytes)) {
    fail(Status::invalid_argument, "%s: %zu x %zu elements of %s overflow the address space", what, count, n,
         dtype_name(dtype));
  }
  return bytes;
}

void check_buffer(const void* buf, size_t bytes, const char* arg) {
  if (!buf && bytes) fail(Status::invalid_argument, "%s is NULL but %zu bytes must be accessed", arg, bytes);
}

void check_rank(int r, int nranks, const char* arg) {
  if (r < 0 || r >= nranks) fail(Status::invalid_argument, "%s = %d is out of range; expected 0..%d", arg, r, nranks - 1);
}

void check_out(const void* p, const char* arg) {
  if (!p) fail(Status::invalid_argument, "%s is NULL; expected a pointer to store the result", arg);
}

void check_no_overlap(const void* a, size_t abytes, const void* b, size_t bbytes, bool allowed_in_place,
                      const char* convention) {
  if (allowed_in_place || !abytes || !bbytes) return;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  if (x < y + bbytes && y < x + abytes) {
    fail(Status::invalid_argument, "send and receive buffers overlap; in place is only %s", convention);
  }
}

void copy_counts(std::vector<size_t>& out, const size_t* arr, int n, const char* arg) {
  if (!arr) fail(Status::invalid_argument, "%s is NULL; expected an array of %d entries", arg, n);
  out.assign(arr, arr + n);
}

size_t extent_of(const std::vector<size_t>& counts, const std::vector<size_t>& displs, DType dtype, const char* what) {
  size_t extent = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    size_t end = 0;
    if (__builtin_add_overflow(counts[i], displs[i], &end)) {
      fail(Status::invalid_argument, "%s: entry %zu: displacement %zu + count %zu overflows", what, i, displs[i], counts[i]);
    }
    check_bytes(end, dtype, what);
    extent = end > extent ? end : extent;
  }
  return extent;
}

}  // namespace weft::capi
