#include "transports/ucx/ucx_transport.h"

#include <dirent.h>
#include <time.h>

#include <cstdlib>
#include <cstring>

#include "core/common/log.h"
#include "core/common/status.h"

namespace weft::transport {
namespace {

void check(ucs_status_t st, const char* what) {
  if (st != UCS_OK) fail(Status::transport, "UCX %s failed: %s", what, ucs_status_string(st));
}

void complete(Op* op, ucs_status_t status) {
  if (status == UCS_OK) {
    op->state.store(Op::State::done, std::memory_order_release);
  } else {
    op->error = ucs_status_string(status);
    op->state.store(Op::State::failed, std::memory_order_release);
  }
}

// Callbacks run inside ucp_worker_progress (under the transport mutex). They release the UCX
// request at once: nothing else refers to it after completion.
void send_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->handle = nullptr;
  complete(op, status);
  ucp_request_free(request);
}

void recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->handle = nullptr;
  if (status == UCS_OK) op->received = info->length;
  complete(op, status);
  ucp_request_free(request);
}

// Sets a UCX option unless the user's environment already names it (then theirs stands).
// ucp_config_modify takes a transport's option without its prefix (TCP's TX_SEG_SIZE is
// UCX_TCP_TX_SEG_SIZE in the environment).
void default_option(ucp_config_t* config, const char* env_name, const char* option, const char* value) {
  if (std::getenv(env_name)) return;
  if (ucp_config_modify(config, option, value) != UCS_OK) {
    log(LogLevel::info, "this UCX has no %s option; left at UCX's default", env_name);
  }
}

// Across hosts without RDMA, UCX moves every byte through TCP sockets, and its defaults cost
// system calls and round trips there (4-rank 1 MiB allreduce over a veth, per call and rank:
// 83 non-waiting calls, against 26-31 with the values below and Open MPI's 28;
// tests/multiproc/syscall-budget --netns, docs/performance.md "Socket tuning"):
//  - rendezvous from 8 KiB: each message waits a round trip (RTS, RTR) that buys no zero copy
//    on a socket. Eager up to 1 MiB drops the sendto's and the wait; the point-to-point
//    algorithms' messages are at most a chunk (WEFT_P2P_CHUNK_BYTES, 1 MiB), and a message
//    that arrives before its receive is posted is buffered by UCX up to that size only;
//  - 8 KiB send and 64 KiB receive segments split each message into that many system calls.
// An RDMA device (any entry in /sys/class/infiniband) keeps UCX's choice: there rendezvous is
// zero copy. The TCP options only exist on TCP, so they are set either way. The threshold is
// the context's, so same-host traffic that stays on UCX (WEFT_SHM_P2P=0) gets it too: there a
// 64 KiB sendrecv takes the same 43 us either way, but UCX allocates 0.5 times per call for
// eager fragments that arrive before their receive (0 with rendezvous).
void tune_for_sockets(ucp_config_t* config) {
  default_option(config, "UCX_TCP_TX_SEG_SIZE", "TX_SEG_SIZE", "64K");
  default_option(config, "UCX_TCP_RX_SEG_SIZE", "RX_SEG_SIZE", "256K");
  bool rdma = false;
  if (DIR* d = opendir("/sys/class/infiniband")) {
    while (dirent* e = readdir(d)) rdma = rdma || e->d_name[0] != '.';
    closedir(d);
  }
  if (!rdma) default_option(config, "UCX_RNDV_THRESH", "RNDV_THRESH", "1M");
}

}  // namespace

UcxTransport::UcxTransport() {
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "config read");
  // Same-host endpoints run without peer-failure mode (see connect()). UCX's CMA transport
  // reads the peer's memory with process_vm_readv, and when the peer has died UCX treats the
  // ESRCH as fatal and aborts this process. The other shared-memory transports only touch the
  // shared segment, so a dead peer is merely silent and weft's liveness check reports it.
  // Users who set UCX_TLS themselves get exactly what they asked for.
  default_option(config, "UCX_TLS", "TLS", "^cma");
  // Without CMA, UCX 1.13 picks TCP's emulated put-zcopy for the rendezvous of large messages
  // even between ranks on one host: every such message went over loopback sockets (~12 system
  // calls per 1 MiB send) at a third of the speed of the shared-memory fifo that the rendezvous
  // falls back to without it (weft-bench sendrecv 2 ranks, 1 MiB: 218 us vs 72 us). Across hosts
  // the fallback (active messages over the same TCP socket) moves the same bytes. Users who set
  // UCX_TCP_PUT_ENABLE themselves keep their choice.
  default_option(config, "UCX_TCP_PUT_ENABLE", "PUT_ENABLE", "n");
  tune_for_sockets(config);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 0;
  ucs_status_t st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check(st, "context init (ucp_init)");
  // Which memory UCX can move: Debian's UCX has host memory only, a CUDA-enabled build lists
  // CUDA too, and then device buffers go to it directly (core/device/p2p.cpp).
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context_, &attr) == UCS_OK) {
    cuda_memory_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  }
#if defined(WEFT_TEST_SEAMS)
  // Emulated test builds only: pretend so, for the CUDA emulator with host-visible device memory
  // (tests/cuda_emulator: WEFT_EMU_HOST_VISIBLE_DEVICE_MEMORY), where the direct path can run.
  if (const char* v = std::getenv("WEFT_TEST_UCX_CUDA"); v && std::strcmp(v, "1") == 0) cuda_memory_ = true;
#endif
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    ucp_cleanup(context_);
    check(st, "worker create");
  }
}

UcxTransport::~UcxTransport() {
  close_endpoints();
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
}

void UcxTransport::close_endpoints() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Force-close: peers may be gone, and a flush could wait forever. Bounded progress loop so a
  // wedged peer cannot hang the destructor.
  std::vector<ucs_status_ptr_t> pending;
  for (ucp_ep_h ep : endpoints_) {
    if (!ep) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) pending.push_back(r);
  }
  for (int spins = 0; !pending.empty() && spins < 100000; ++spins) {
    ucp_worker_progress(worker_);
    for (size_t i = 0; i < pending.size();) {
      if (ucp_request_check_status(pending[i]) != UCS_INPROGRESS) {
        ucp_request_free(pending[i]);
        pending[i] = pending.back();
        pending.pop_back();
      } else {
        ++i;
      }
    }
  }
  endpoints_.clear();
  peer_of_ep_.clear();
}

std::string UcxTransport::local_address() {
  std::lock_guard<std::mutex> lock(mutex_);
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  check(ucp_worker_get_address(worker_, &addr, &len), "worker get address");
  std::string out(reinterpret_cast<const char*>(addr), len);
  ucp_worker_release_address(worker_, addr);
  return out;
}

void UcxTransport::on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<UcxTransport*>(arg);
  auto it = self->peer_of_ep_.find(ep);
  if (it == self->peer_of_ep_.end()) return;
  self->peer_failed_[it->second].store(true, std::memory_order_release);
  log(LogLevel::info, "UCX endpoint to peer %d failed: %s", it->second, ucs_status_string(status));
}

void UcxTransport::connect(const std::vector<std::string>& addresses, int self_index,
                           const std::vector<bool>& same_host) {
  std::lock_guard<std::mutex> lock(mutex_);
  npeers_ = static_cast<int>(addresses.size());
  peer_failed_.reset(new std::atomic<bool>[addresses.size()]);
  endpoints_.assign(addresses.size(), nullptr);
  for (size_t i = 0; i < addresses.size(); ++i) {
    peer_failed_[i].store(false);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[i].data());
    if (same_host[i]) {
      ++same_host_peers_;
      // UCX 1.13's shared-memory transports (posix, sysv, cma) and self have no peer-failure
      // handler, so asking for one would push same-host traffic onto TCP loopback. A
      // same-host peer's death is caught by World's process check instead.
      ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    } else {
      // Peer failure mode: a dead peer fails its endpoint's operations instead of hanging them.
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &UcxTransport::on_ep_error;
      ep.err_handler.arg = this;
    }
    ucs_status_t st = ucp_ep_create(worker_, &ep, &endpoints_[i]);
    if (st != UCS_OK) {
      fail(Status::transport, "UCX could not create an endpoint to rank %zu (self %d): %s", i,
           self_index, ucs_status_string(st));
    }
    peer_of_ep_[endpoints_[i]] = static_cast<int>(i);
  }
}

void UcxTransport::send(Op& op, int peer, Tag tag, const void* buf, size_t bytes) {
  op.begin(peer, false, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &send_done;
  p.user_data = &op;
  ucs_status_ptr_t r = ucp_tag_send_nbx(endpoints_[peer], buf, bytes, tag, &p);
  if (r == nullptr) {
    complete(&op, UCS_OK);
  } else if (UCS_PTR_IS_ERR(r)) {
    complete(&op, UCS_PTR_STATUS(r));
  } else {
    op.handle = r;
  }
}

void UcxTransport::recv(Op& op, int peer, Tag tag, void* buf, size_t bytes) {
  post_recv(op, peer, tag, ~Tag{0}, buf, bytes);
}

void UcxTransport::recv_any_sender(Op& op, Tag tag, void* buf, size_t bytes) {
  post_recv(op, -1, tag, ~(Tag{0xffff} << 32), buf, bytes);
}

void UcxTransport::post_recv(Op& op, int peer, Tag tag, Tag mask, void* buf, size_t bytes) {
  op.begin(peer, true, bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ucp_request_param_t p{};
  // No immediate completion: UCX 1.13 leaves recv_info.tag_info unfilled when a receive
  // matches an already-arrived message inside ucp_tag_recv_nbx, so the received length would
  // be unknown. Completion always comes through recv_done, which gets the length.
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = &recv_done;
  p.user_data = &op;
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, buf, bytes, tag, mask, &p);
  if (r == nullptr) {
    fail(Status::internal, "UCX completed a receive immediately despite UCP_OP_ATTR_FLAG_NO_IMM_CMPL");
  } else if (UCS_PTR_IS_ERR(r)) {
    complete(&op, UCS_PTR_STATUS(r));
  } else {
    op.handle = r;
  }
}

void UcxTransport::cancel(Op& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (op.handle && !op.finished()) ucp_request_cancel(worker_, op.handle);
}

bool UcxTransport::progress() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ucp_worker_progress(worker_) != 0;
}

void UcxTransport::wait_for_activity(int max_us) {
  // Sleeping (rather than arming UCX wakeup) keeps every UCX transport eligible, shared memory
  // included; the progress engine only calls this after spinning and yielding found nothing.
  struct timespec ts{0, static_cast<long>(max_us) * 1000L};
  nanosleep(&ts, nullptr);
}

bool UcxTransport::peer_failed(int peer) const {
  return peer >= 0 && peer < npeers_ && peer_failed_[peer].load(std::memory_order_acquire);
}

std::string UcxTransport::describe() const {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  return format("UCX %u.%u.%u, %d endpoints: %d on this host (UCX shared memory), %d remote (peer-failure mode); "
                "CUDA memory: %s",
                major, minor, release, npeers_, same_host_peers_, npeers_ - same_host_peers_,
                cuda_memory_ ? "yes (device buffers go to UCX directly)" : "no (device buffers are staged)");
}

}  // namespace weft::transport
