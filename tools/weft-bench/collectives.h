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
  int64_t rows = 0;       // redist_*: the global 2-d tensor (redistribution.h)
  int64_t cols = 0;
};

// nccl-tests' rule: the requested size is the whole message; collectives made of per-rank
// blocks round it down to a multiple of nranks elements.
Shape shape_of(Coll c, size_t requested_bytes, size_t elem_size, int nranks);
// busbw = algbw * bus_factor (nccl-tests' definitions).
double bus_factor(Coll c, int nranks);
bool is_reduction(Coll c);
bool is_rooted(Coll c);
// sendrecv has no in-place form here (sending from and receiving into one buffer at once), nor
// do the redistributions (weft_redistribute refuses overlapping source and destination).
bool has_inplace(Coll c);
bool is_redistribution(Coll c);

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

// What main.cpp measures: one operation with fixed dtype, op and root, on buffers large enough
// for every size. Case (below) is a plain collective, redistribution.h's RedistCase a
// weft_redistribute.
class Bench {
 public:
  Bench(Coll c, const DtypeInfo& t) : coll_(c), t_(t) {}
  virtual ~Bench() = default;
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  // Called once per size before fill(): set-up that stays outside the timing (collective).
  virtual void prepare(const Shape& /*shape*/) {}
  // Starts one operation at `shape`. reqs == nullptr: blocking. Otherwise its requests are
  // appended to *reqs (the caller waits for them).
  virtual void issue(const Shape& shape, bool inplace, std::vector<weft_request_t>* reqs) = 0;
  // Writes this rank's inputs for one checked run (and poisons the outputs).
  virtual void fill(const Shape& shape, bool inplace) = 0;
  // Number of wrong elements in this rank's result of the run after fill().
  virtual size_t count_wrong(const Shape& shape, bool inplace) const = 0;

  Coll coll() const { return coll_; }
  const DtypeInfo& dtype() const { return t_; }

 protected:
  Coll coll_;
  const DtypeInfo& t_;
};

// One plain collective.
class Case : public Bench {
 public:
  Case(const Comm& comm, Coll c, const DtypeInfo& t, weft_op_t op, int root, size_t max_bytes);

  void issue(const Shape& shape, bool inplace, std::vector<weft_request_t>* reqs) override;
  void fill(const Shape& shape, bool inplace) override;
  size_t count_wrong(const Shape& shape, bool inplace) const override;

 private:
  // Value rank r holds at element i of its send buffer.
  double input(int r, size_t i) const;
  // The reference reduction over all ranks of input(., i), rounded to the type.
  double reduced(size_t i) const;
  void send_recv_ptrs(const Shape& shape, bool inplace, void** send, void** recv) const;
  char* elem(char* base, size_t i) const { return base + i * t_.size; }

  Comm comm_;
  weft_op_t op_;
  int root_;
  int64_t sum_range_;      // inputs of sum/avg lie in [0, sum_range_)
  int64_t pattern_range_;  // inputs of min/max and data movement lie in [0, pattern_range_)
  HostBuffer send_, recv_;
};

}  // namespace weftbench
