// Argument checks shared by the C shims. Each throws weft::Error(invalid_argument or
// unsupported) whose text names the argument and what was expected.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "core/common/dtype.h"
#include "core/common/status.h"
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
// Copies a per-rank size_t array (v-collectives) into `out` (its storage reused), checking the
// pointer. extent_of then checks that every displacement + count stays inside size_t bytes and
// returns the largest extent in elements.
void copy_counts(std::vector<size_t>& out, const size_t* arr, int n, const char* arg);
size_t extent_of(const std::vector<size_t>& counts, const std::vector<size_t>& displs, DType dtype, const char* what);

// Structs that begin with size_t struct_size (older callers pass fewer fields): refuses a size
// below the field itself or above this library's struct, naming the argument and its _INIT macro.
template <class T>
void check_struct_size(const T* s, const char* arg, const char* init) {
  if (s->struct_size < sizeof(size_t) || s->struct_size > sizeof(T)) {
    fail(Status::invalid_argument, "%s->struct_size = %zu; initialise it with %s", arg, s->struct_size, init);
  }
}

// An input struct: the caller's fields copied over the defaults (NULL is refused: a caller
// whose struct is optional passes its defaults itself).
template <class T>
T read_struct(const T* given, const T& defaults, const char* arg, const char* init) {
  if (!given) fail(Status::invalid_argument, "%s is NULL; initialise one with %s", arg, init);
  check_struct_size(given, arg, init);
  T c = defaults;
  std::memcpy(&c, given, given->struct_size);
  return c;
}

// An output struct: as many of `value`'s fields as the caller's struct_size has room for.
template <class T>
void write_struct(T* dest, T value) {
  value.struct_size = dest->struct_size;
  std::memcpy(dest, &value, dest->struct_size);
}

}  // namespace weft::capi
