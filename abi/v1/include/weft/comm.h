/*
 * weft/comm.h - communicators, requests, collectives and point-to-point (host memory over UCX and
 * shared memory; device memory over NCCL or staging). Part of the C ABI of libweft.so; include
 * <weft/weft.h>.
 */
#ifndef WEFT_COMM_H
#define WEFT_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_comm *weft_comm_t;
typedef struct weft_request *weft_request_t;

/* Transport preference for host memory. */
typedef enum weft_transport {
  WEFT_TRANSPORT_AUTO = 0, /* UCX picks shared memory, CMA, TCP, IB - whatever reaches the peer */
  WEFT_TRANSPORT_UCX = 1
} weft_transport_t;

/*
 * Communicator options. Always initialise with WEFT_COMM_CONFIG_INIT, then set fields:
 *   weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT; cfg.timeout_ms = 5000;
 * struct_size lets newer libraries accept older callers: fields beyond struct_size take their
 * defaults. A struct_size smaller than the first version's or larger than this library knows
 * is rejected with WEFT_ERR_INVALID_ARGUMENT. A NULL config means all defaults.
 */
typedef struct weft_comm_config {
  size_t struct_size;
  /* Deadline for every blocking wait, in milliseconds. 0 = WEFT_TIMEOUT env (seconds) or the
   * default of 300 s. <0 is invalid. */
  int64_t timeout_ms;
  weft_transport_t transport;
  /* Name used in log lines and error messages; copied; NULL = "weft". */
  const char *name;
  /* 1 = compare op/dtype/count/root across ranks before each collective (as WEFT_DEBUG=check);
   * 0 = take WEFT_DEBUG from the environment. */
  int check_collectives;
} weft_comm_config_t;

#define WEFT_COMM_CONFIG_INIT \
  { sizeof(weft_comm_config_t), 0, WEFT_TRANSPORT_AUTO, NULL, 0 }

/* ------------------------------------------------------------------ communicators */

/* Opaque job identity: address of the rendezvous store and the job secret. Made by one
 * process with weft_get_unique_id (which also starts the store in that process), then
 * broadcast by the caller's own means (MPI, a file, ...) to every rank. */
#define WEFT_UNIQUE_ID_BYTES 128
typedef struct weft_unique_id {
  char internal[WEFT_UNIQUE_ID_BYTES];
} weft_unique_id_t;

/* Starts a rendezvous store in this process (listening on WEFT_MASTER_ADDR or all interfaces,
 * port WEFT_UNIQUE_ID_PORT or any free one) and describes it in *id. Other ranks reach it at
 * WEFT_MASTER_ADDR, else this host's name, else 127.0.0.1. The store lives until
 * every communicator created from the id in this process is destroyed, or the process exits. */
weft_status_t weft_get_unique_id(weft_unique_id_t *id);

/* Collective over `nranks` processes: all call it with the same id and distinct ranks. */
weft_status_t weft_comm_init(weft_comm_t *comm, const weft_unique_id_t *id, int rank, int nranks,
                             const weft_comm_config_t *config);

/* Reads rank, size and store address from the environment, first match wins:
 *   weft:      WEFT_RANK, WEFT_WORLD_SIZE, WEFT_MASTER_ADDR, WEFT_MASTER_PORT [, WEFT_LOCAL_RANK]
 *   torchrun:  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT [, LOCAL_RANK]
 *   Open MPI:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE [, OMPI_COMM_WORLD_LOCAL_RANK]
 *   PMI:       PMI_RANK, PMI_SIZE
 *   Slurm:     SLURM_PROCID, SLURM_NTASKS [, SLURM_LOCALID]
 * The store address always comes from WEFT_MASTER_ADDR/PORT or MASTER_ADDR/PORT. Rank 0 runs
 * the store unless WEFT_STORE_HOSTED=1 (weftrun hosts it). The secret is WEFT_JOB_SECRET. */
weft_status_t weft_comm_init_from_env(weft_comm_t *comm, const weft_comm_config_t *config);

/* Collective over `comm`: ranks passing the same color >= 0 form a new communicator, ordered by
 * (key, old rank). color < 0 (WEFT_SPLIT_NOCOLOR) yields *newcomm = NULL. config NULL = inherit. */
#define WEFT_SPLIT_NOCOLOR (-1)
weft_status_t weft_comm_split(weft_comm_t comm, int color, int key, weft_comm_t *newcomm,
                              const weft_comm_config_t *config);
/* Collective over `comm`: a new communicator with the same ranks and its own message space. */
weft_status_t weft_comm_dup(weft_comm_t comm, weft_comm_t *newcomm);

weft_status_t weft_comm_rank(weft_comm_t comm, int *rank);
weft_status_t weft_comm_size(weft_comm_t comm, int *size);
/* Rank among the processes of this communicator on the same host, and how many there are. */
weft_status_t weft_comm_local_rank(weft_comm_t comm, int *local_rank);
weft_status_t weft_comm_local_size(weft_comm_t comm, int *local_size);

/* Any thread, any time: every pending and later operation on comm fails with
 * WEFT_ERR_ABORTED. The handle must still be destroyed. */
weft_status_t weft_comm_abort(weft_comm_t comm);
/* Waits for this rank's outstanding operations on comm (with the deadline), then frees it.
 * Not collective. NULL is accepted. */
weft_status_t weft_comm_destroy(weft_comm_t comm);

/* ------------------------------------------------------------------ requests */

/* Every operation below takes `weft_request_t *request`: NULL = blocking (returns when done);
 * non-NULL = asynchronous: returns at once with *request set, the buffers must stay untouched
 * until weft_wait/weft_test reports completion. Operations on one communicator complete in the
 * order they were issued. */
weft_status_t weft_wait(weft_request_t request);
/* WEFT_OK when complete (sets *done=1), WEFT_IN_PROGRESS when not (sets *done=0), or the
 * operation's error. done may be NULL. */
weft_status_t weft_test(weft_request_t request, int *done);
/* Frees a request; if still pending it is waited for first (with the deadline). NULL ok. */
weft_status_t weft_request_free(weft_request_t request);

/* ------------------------------------------------------------------ collectives
 *
 * Counts are in elements of `dtype`. A NULL buffer is allowed only with a zero count.
 *
 * Memory (the rule applies per call, to the buffers the call uses on this rank):
 *  - all host memory (pageable or pinned): the host path (UCX, shared memory); `stream` must be
 *    NULL (else WEFT_ERR_UNSUPPORTED).
 *  - all CUDA device memory of the communicator's GPU: the device path, NCCL when every rank of
 *    the communicator has a GPU of its own, else staged through pinned host memory (e.g. ranks
 *    sharing a GPU, which NCCL refuses; WEFT_NCCL=0 forces staging). The GPU is WEFT_DEVICE, else
 *    local rank % visible devices, chosen when the communicator is created (split/dup keep it).
 *  - refused: host and device buffers mixed in one call, and managed memory
 *    (WEFT_ERR_UNSUPPORTED); a buffer or stream of another GPU (WEFT_ERR_INVALID_ARGUMENT).
 *  Every rank must use the same kind of memory for a collective (WEFT_DEBUG=check reports a
 *  mismatch on the NCCL path). A build without CUDA treats every pointer as host memory, except
 *  that it refuses device memory when the process has the CUDA driver loaded.
 *
 * Streams (`stream` is a CUDA stream handle passed as void *; device memory only):
 *  - NULL: the communicator's own stream, which is ordered after work queued earlier on the legacy
 *    default stream (work on other streams must be complete first); without a request the call
 *    returns when the work is complete.
 *  - a stream, no request: stream-ordered, as NCCL: the call returns once the work is queued
 *    (staged calls return when it is complete); later work on the stream sees the results.
 *  - with a request: it completes when the stream reaches the end of the work.
 *  - cudaStreamPerThread is refused (WEFT_ERR_INVALID_ARGUMENT): weft may issue work from its own
 *    thread, where that handle names another stream. The legacy default stream's handle is fine.
 *  Every wait for device work (a NULL-stream call, weft_wait, weft_request_free) watches NCCL for
 *  errors and, at the communicator's deadline, aborts it: WEFT_ERR_TIMEOUT names the operation
 *  and its sequence number (NCCL itself never times out). A stream-ordered call that fails later
 *  is reported by the next call on the communicator. Device calls keep issue order with host
 *  calls: one made while asynchronous host calls are queued waits for them.
 *  Low-precision reductions keep the rules above on NCCL too: f16/bf16/fp8 travel as float32.
 *  Device point-to-point through NCCL is ordered with the collectives on the stream, and a send
 *  waits there until the peer receives. A two-way exchange (each rank sends to and receives from
 *  the other, a ring shift, an all-to-all) must be one weft_p2p_batch call: separate
 *  weft_send/weft_recv calls, even on separate streams or with requests, can deadlock, since NCCL
 *  serialises a communicator's work and connects a pair of ranks only when both have issued
 *  their side. Device point-to-point to the rank itself is staged (also inside a batch).
 *  Device point-to-point, like device collectives, keeps issue order: it is posted after the
 *  communicator's queued asynchronous calls (so a send reads what they wrote). A staged device
 *  receive with a request lands in the buffer when weft_test reports completion or weft_wait
 *  returns (later stream work is ordered after that, not after the call).
 * In-place: allreduce, broadcast, reduce, alltoall, alltoallv: sendbuf == recvbuf.
 *           allgather(v), gather: sendbuf == recvbuf + this rank's offset (as NCCL/MPI_IN_PLACE).
 *           reduce_scatter: recvbuf == sendbuf + rank * recvcount elements.
 *           scatter: recvbuf == sendbuf + root * count elements at the root.
 * Any other overlap between send and receive buffers is WEFT_ERR_INVALID_ARGUMENT.
 */
weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                             weft_op_t op, weft_comm_t comm, void *stream, weft_request_t *request);
/* buf on root is sent; on the others it is received into. */
weft_status_t weft_broadcast(void *buf, size_t count, weft_dtype_t dtype, int root, weft_comm_t comm,
                             void *stream, weft_request_t *request);
/* recvbuf is used on root only (may be NULL elsewhere). */
weft_status_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                          weft_op_t op, int root, weft_comm_t comm, void *stream,
                          weft_request_t *request);
/* recvbuf holds nranks * sendcount elements, rank i's block at i * sendcount. */
weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, weft_dtype_t dtype,
                             weft_comm_t comm, void *stream, weft_request_t *request);
/* Rank i contributes recvcounts[i] elements placed at displs[i] (elements) of recvbuf.
 * sendcount must equal recvcounts[rank]. Arrays have nranks entries. */
weft_status_t weft_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                              const size_t *recvcounts, const size_t *displs, weft_dtype_t dtype,
                              weft_comm_t comm, void *stream, weft_request_t *request);
/* sendbuf holds nranks * recvcount elements; rank i receives the reduction of block i. */
weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  weft_dtype_t dtype, weft_op_t op, weft_comm_t comm, void *stream,
                                  weft_request_t *request);
/* Block j (count elements) of sendbuf goes to rank j; block i of recvbuf comes from rank i. */
weft_status_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype,
                            weft_comm_t comm, void *stream, weft_request_t *request);
/* sendcounts[j] elements at sdispls[j] go to rank j; recvcounts[i] elements from rank i land at
 * rdispls[i]. Counts must agree pairwise (checked in WEFT_DEBUG=check mode). */
weft_status_t weft_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                             void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                             weft_dtype_t dtype, weft_comm_t comm, void *stream,
                             weft_request_t *request);
/* recvbuf (root only) holds nranks * count elements. */
weft_status_t weft_gather(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype, int root,
                          weft_comm_t comm, void *stream, weft_request_t *request);
/* sendbuf (root only) holds nranks * count elements. */
weft_status_t weft_scatter(const void *sendbuf, void *recvbuf, size_t count, weft_dtype_t dtype, int root,
                           weft_comm_t comm, void *stream, weft_request_t *request);
weft_status_t weft_barrier(weft_comm_t comm, void *stream, weft_request_t *request);
/* Point-to-point: messages between a pair of ranks on one communicator match in issue order.
 * The receive count must equal the send count (a mismatch is WEFT_ERR_MISMATCH). */
weft_status_t weft_send(const void *buf, size_t count, weft_dtype_t dtype, int peer, weft_comm_t comm,
                        void *stream, weft_request_t *request);
weft_status_t weft_recv(void *buf, size_t count, weft_dtype_t dtype, int peer, weft_comm_t comm,
                        void *stream, weft_request_t *request);

/* Batched point-to-point (as NCCL's ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd, or torch's
 * batch_isend_irecv): every operation of ops[0..nops) is posted at once, and the call (or its
 * request) completes when all of them have completed. Any mix of sends and receives, to any
 * peers, the rank itself included, with any counts (0 too) and dtypes. Matching follows the
 * rule above: between two ranks, sends and receives pair in issue order per direction, the
 * batch's operations taking their place in the order of the array, so a batch's send may be
 * received by weft_recv (or by another rank's batch) and vice versa.
 * Use it for every exchange in which a rank both sends and receives (ring shifts, halo
 * exchanges, all-to-all by hand, pipeline send-forward-receive-backward): on device memory
 * through NCCL it is the only deadlock-free way (see "Streams" above); on host memory it saves
 * a request per message.
 * Memory: all buffers of one batch are host memory or all device memory, with the collectives'
 * rules ("Memory" above; a mix is WEFT_ERR_UNSUPPORTED naming both ops). nops == 0 does nothing
 * and completes at once (a request is still returned). ops may be NULL only when nops == 0.
 * The array is read during the call only; the buffers must stay untouched until completion.
 * Buffers of one batch must not overlap where one of them is a receive.
 *
 * weft_p2p_op_t is an element of an array, so its size is the array's stride: unlike the option
 * structs it carries no struct_size (a caller's and the library's idea of the stride must agree
 * without one). Its layout is frozen for WEFT_ABI_VERSION 1; an extension would come as a new
 * function, not as new fields. Initialise every field:
 *   weft_p2p_op_t ops[2] = {{WEFT_P2P_SEND, sbuf, n, WEFT_FLOAT32, right},
 *                           {WEFT_P2P_RECV, rbuf, n, WEFT_FLOAT32, left}};
 *   weft_p2p_batch(ops, 2, comm, NULL, NULL);
 */
typedef enum weft_p2p_kind {
  WEFT_P2P_SEND = 0,
  WEFT_P2P_RECV = 1
} weft_p2p_kind_t;

typedef struct weft_p2p_op {
  weft_p2p_kind_t kind;
  void *buf;          /* sends only read it */
  size_t count;       /* elements of dtype; the receive's count must equal the send's */
  weft_dtype_t dtype;
  int peer;           /* rank in comm; this rank itself is allowed */
} weft_p2p_op_t;

weft_status_t weft_p2p_batch(const weft_p2p_op_t *ops, size_t nops, weft_comm_t comm, void *stream,
                             weft_request_t *request);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMM_H */
