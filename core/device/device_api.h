// Device memory (DESIGN.md: "Transport choice per buffer"): what capi/ and core/ call. The
// declarations hold in every build; a CUDA build implements them in this folder (NCCL when the
// communicator has it, else staging through pinned host memory), a host-only build in
// host_only.cpp (everything is host memory; a stream is refused).
//
// No CUDA type appears here: streams are void * (cudaStream_t), as in weft.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "core/comm/comm.h"
#include "core/common/dtype.h"
#include "kernels/cpu/strided_copy.h"

namespace weft::shard {
struct Sharded;
struct Plan;
}  // namespace weft::shard

namespace weft::gpu {

// One buffer argument of a call, for routing: bytes == 0 (or ptr == NULL) means "not used".
struct BufferRef {
  const void* ptr;
  size_t bytes;
  const char* name;  // the argument's name in weft.h, for messages
};

enum class Route { host, device };

// Where a call runs (the rule is stated in weft.h, "collectives"): all used buffers device
// memory of the communicator's GPU -> device; all host memory (pageable or pinned) with a NULL
// stream -> host. Throws Error with the argument's name for a mix of host and device buffers,
// managed memory, a buffer or stream on another GPU, or a stream with host buffers. A call
// whose buffers are all unused goes to the device when it has a stream.
Route route(Comm& comm, void* stream, std::span<const BufferRef> buffers);
inline Route route(Comm& comm, void* stream, std::initializer_list<BufferRef> buffers) {
  return route(comm, stream, std::span<const BufferRef>(buffers.begin(), buffers.size()));
}

// Completion of device work handed back as a weft_request_t.
class Pending {
 public:
  virtual ~Pending() = default;
  // True when complete; throws the operation's error (timeout, abort, NCCL or CUDA failure).
  virtual bool test() = 0;
  // Until complete, within the communicator's deadline; throws like test().
  virtual void wait() = 0;
};

// One device operation being issued (stream, sequence number, NCCL or staging); defined in
// launch.h for this folder's code only.
class Launch;
using DeviceWork = std::function<void(Launch&)>;

// What a device operation is to the communicator's sequence numbers: a collective takes the
// next one on every rank (its WEFT_DEBUG=check exchange and the host path's tags use it);
// point-to-point involves two ranks only, so it must not take one (the other ranks' numbers
// would fall out of step and their next host collective would never match).
enum class DeviceOp { collective, point_to_point };

// Runs `work` in issue order with the communicator's other operations (its executor), on
// `stream` or, when stream is NULL, on the communicator's own stream. Returns a Pending when
// want_request, else nullptr after the work is queued on a user stream (stream-ordered, as
// NCCL) or complete (NULL stream: the call waits, with the NCCL watchdog).
std::shared_ptr<Pending> launch(const std::shared_ptr<Comm>& comm, const char* operation, DeviceOp kind, void* stream,
                                bool want_request, DeviceWork work);

// The collectives of core/collectives/collectives.h on device buffers, with the same argument
// rules (already validated by the C shims). Called inside launch()'s work.
void allreduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op);
void broadcast(Launch& l, void* buf, size_t count, DType dtype, int root);
void reduce(Launch& l, const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root);
void allgather(Launch& l, const void* send, void* recv, size_t count, DType dtype);
void allgatherv(Launch& l, const void* send, size_t sendcount, void* recv, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs, DType dtype);
void reduce_scatter(Launch& l, const void* send, void* recv, size_t recvcount, DType dtype, ReduceOp op);
void alltoall(Launch& l, const void* send, void* recv, size_t count, DType dtype);
void alltoallv(Launch& l, const void* send, const std::vector<size_t>& sendcounts, const std::vector<size_t>& sdispls,
               void* recv, const std::vector<size_t>& recvcounts, const std::vector<size_t>& rdispls, DType dtype);
void gather(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root);
void scatter(Launch& l, const void* send, void* recv, size_t count, DType dtype, int root);
void barrier(Launch& l);

// One send or receive of a point-to-point batch (weft_p2p_batch; weft_send/weft_recv are
// batches of one). peer is a rank of the communicator.
struct P2POp {
  bool is_send;
  void* buf;
  size_t bytes;
  int peer;
};

// Point-to-point on device buffers, all of `ops` posted together: through NCCL (one
// ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd, stream-ordered with the collectives) or staged
// (posted to UCX at once, like host point-to-point). Operations to the rank itself are always
// staged. Returns a Pending when want_request, else completes (or queues, on a user stream with
// NCCL).
std::shared_ptr<Pending> p2p(const std::shared_ptr<Comm>& comm, const char* operation, const std::vector<P2POp>& ops,
                             void* stream, bool want_request);

// weft_redistribute on device memory (weft/mesh.h): core/sharding's algorithm over
// redistribute_device.h's backend, `plan` made by shard::make_plan(src, dst). Collective over
// the members of src's and dst's meshes; the caller has checked that this rank's local pieces
// are device memory of the communicators' GPU (route()). Every step is queued on one stream:
// `stream`, or when it is NULL the own stream of the anchor communicator (the mesh's whole
// communicator, or between meshes their parent), ordered after the caller's work on the legacy
// default stream. Returns a Pending when want_request; else nullptr once the work is queued (a
// user stream: stream-ordered, as NCCL) or complete (NULL stream: waited for within the
// anchor's deadline, the watchdog covering every communicator the steps used). Steps over a
// communicator without NCCL are staged, which is host-driven: they are done when the call
// returns, also with a request (whose completion then covers the device work queued after).
// Built without CUDA: Error(unsupported).
std::shared_ptr<Pending> redistribute(const shard::Sharded& src, const shard::Sharded& dst, const shard::Plan& plan,
                                      void* stream, bool want_request);

// Staging between device and host memory for distributed checkpoints (weft/mesh.h,
// "distributed checkpoints"; core/sharding/checkpoint_save.cpp, checkpoint_load.cpp), which
// read and write files from host memory only. `view` is a local piece in device memory of GPU
// `device` (weft_tensor_t device_id), any strides; `host` is view.numel() elements, contiguous
// and row-major. Each call makes `device` current for its duration (DeviceGuard), works on the
// legacy default stream (so it is ordered after work the caller queued there or on a blocking
// stream; work on a non-blocking stream must be complete) and returns when done. A strided view
// goes through a device temporary of at most 8 MiB (kernels/cuda/strided_copy.h), chunk by
// chunk; a contiguous one is one cudaMemcpy. Built without CUDA: Error(unsupported).
//
// check_device_view: Error(invalid_argument) naming `name` unless the first and last bytes of
// `view` are device memory of GPU `device` (an empty view passes, so does any device number
// for it). Called before any data moves, so that a bad argument fails early.
void check_device_view(const kernels::StridedView& view, int device, const char* name);
// host <- view.
void copy_to_host(void* host, const kernels::StridedView& view, int device);
// view <- host; only view's elements are written.
void copy_from_host(const kernels::StridedView& view, const void* host, int device);

// Gradient buckets in device memory (core/training/bucketer.cpp, weft/training.h):
// device_buffer: `bytes` of zeroed device memory on comm's GPU, freed (cudaFree, which waits for
//   the work using it) when the last reference goes. device_id: comm's GPU (-1: none).
// copy_device: within launch()'s work, `bytes` from src to dst (device memory) on its stream.
// Built without CUDA: Error(unsupported) / -1.
std::shared_ptr<void> device_buffer(Comm& comm, size_t bytes);
int device_id(const Comm& comm);
void copy_device(Launch& l, void* dst, const void* src, size_t bytes);
// Ends work that queued copies after a collective: a staged launch must be complete when its
// work returns (its request is the executor's task), so this waits for the stream there; on NCCL
// the stream orders everything and nothing is waited for.
void settle_copies(Launch& l);

// Comm creation hook (core/comm/create.cpp): collective over the new communicator, while every
// rank is inside the creating call. Picks the GPU (the parent's, else WEFT_DEVICE, else
// local_rank % device count) and sets up NCCL when every rank has its own GPU; otherwise device
// buffers are staged. Never throws for a local CUDA/NCCL problem (that would leave the other
// ranks waiting): it logs it (WEFT_DEBUG=info) and the communicator goes without.
//
// `split` is what split_device() gave this rank when `comm` comes from weft_comm_split/dup.
struct SplitDevice;
void attach(Comm& comm, const Comm* parent, std::shared_ptr<SplitDevice> split);

// Comm split hook (core/comm/create.cpp), collective over the parent on every one of its ranks,
// including those that get no new communicator (color < 0): when the parent has NCCL, the new
// communicator's NCCL communicator is split from it (ncclCommSplit), which costs far less than
// one made from scratch. The result goes to attach() of the new communicator (nullptr: nothing
// to hand over). Never throws for a local NCCL problem (the new communicator then sets NCCL up
// from scratch, or goes without, as attach() decides).
std::shared_ptr<SplitDevice> split_device(Comm& parent, int color, int key);

}  // namespace weft::gpu
