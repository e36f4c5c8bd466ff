// Argument checks shared by the C shims. Each throws weft::Error(invalid_argument or
// unsupported) whose text names the argument and what was expected.
#pragma once

#include <cstddef>
#include <vector>

#include "core/common/dtype.h"
#include "weft/weft.h"

namespace weft::capi {

// Enums are taken by reference and read by their bytes (see enum_bits in shim.h).
// `arg` names the argument in messages ("dtype", "ops[2].dtype").
DType check_dtype(const weft_dtype_t& dtype, const char* arg = "dtype");
// A built-in op, or a registered custom operator (weft/plugin.h) that takes dtype (unknown and
// destroyed ids and other element types are refused, naming the operator and what it takes).
ReduceOp check_op(const weft_op_t& op, DType dtype);
// Bytes of count elements; throws when count * size overflows size_t.
size_t check_bytes(size_t count, DType dtype, const char* what);
// n * count elements as bytes, overflow checked.
size_t check_bytes_times(size_t count, size_t n, DType dtype, const char* what);
void check_buffer(const void* buf, size_t bytes, const char* arg);
void check_rank(int r, int nranks, const char* arg);
void check_out(const void* p, const char* arg);
// Fails when [a, a+abytes) and [b, b+bbytes) overlap unless `allowed_in_place` says they are the
// documented in-place arrangement.
void check_no_overlap(const void* a, size_t abytes, const void* b, size_t bbytes, bool allowed_in_place,
                      const char* convention);
// Copies a per-rank size_t array (v-collectives), checking pointer and that every
// displacement + count stays inside size_t bytes; returns the largest extent in elements.
std::vector<size_t> copy_counts(const size_t* arr, int n, const char* arg);
size_t extent_of(const std::vector<size_t>& counts, const std::vector<size_t>& displs, DType dtype, const char* what);

}  // namespace weft::capi
