// The collectives weft-bench measures: nccl-tests' size conventions and bus-bandwidth factors,
// how each is called (out-of-place and in-place), its input data and its reference result.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <weft/weft.h>

#include "dtypes.h"
#include "options.h"

namespace weftbench {

// A failed weft call; the message names the call, its status and weft_last_error().
struct WeftError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void check(weft_status_t st, const char* what);

struct Shape {
  size_t sendcount = 0;   // elements in this rank's send buffer
  size_t recvcount = 0;   // elements in this rank's receive buffer
  size_t paramcount = 0;  // the count argument of the call (per-rank block where there are blocks)
  size_t count = 0;       // "count" column: the whole message in elements
  size_t bytes = 0;       // "size" column: count * element size
};

// nccl-tests' rule: the requested size is the whole message; collectives made of per-rank
// blocks round it down to a multiple of nranks elements.
Shape shape_of(Coll c, size_t requested_bytes, size_t elem_size, int nranks);
// busbw = algbw * bus_factor (nccl-tests' definitions).
double bus_factor(Coll c, int nranks);
bool is_reduction(Coll c);
bool is_rooted(Coll c);
// sendrecv has no in-place form here (sending from and receiving into one buffer at once).
bool has_inplace(Coll c);

// Page-aligned host memory, zeroed (so pages are mapped before timing).
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);
  char* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> ptr_;
  size_t size_ = 0;
};

struct Comm {
  weft_comm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
};

// One collective with fixed dtype, op and root, on buffers large enough for every size.
class Case {
 public:
  Case(const Comm& comm, Coll c, const DtypeInfo& t, weft_op_t op, int root, size_t max_bytes);

  // Starts one operation at `shape`. reqs == nullptr: blocking. Otherwise its requests are
  // appended to *reqs (the caller waits for them).
  void issue(const Shape& shape, bool inplace, std::vector<weft_request_t>* reqs);
  // Writes this rank's inputs for one checked run (and poisons the outputs).
  void fill(const Shape& shape, bool inplace);
  // Number of wrong elements in this rank's result of the run after fill().
  size_t count_wrong(const Shape& shape, bool inplace) const;

  Coll coll() const { return coll_; }
  const DtypeInfo& dtype() const { return t_; }

 private:
  // Value rank r holds at element i of its send buffer.
  double input(int r, size_t i) const;
  // The reference reduction over all ranks of input(., i), rounded to the type.
  double reduced(size_t i) const;
  void send_recv_ptrs(const Shape& shape, bool inplace, void** send, void** recv) const;
  char* elem(char* base, size_t i) const { return base + i * t_.size; }

  Comm comm_;
  Coll coll_;
  const DtypeInfo& t_;
  weft_op_t op_;
  int root_;
  int64_t sum_range_;      // inputs of sum/avg lie in [0, sum_range_)
  int64_t pattern_range_;  // inputs of min/max and data movement lie in [0, pattern_range_)
  HostBuffer send_, recv_;
};

}  // namespace weftbench
