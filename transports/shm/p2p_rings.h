// Point-to-point between ranks on one host through weft's own shared memory, so same-host
// send/recv needs neither UCX nor CMA (which reads a peer's memory with process_vm_readv, and
// UCX aborts the process when that peer has died).
//
// Every rank owns an inbox segment holding one ring per same-host sender. A ring is a fixed
// number of chunks; the sender is the only writer of its head counter and of the chunks, the
// receiver the only writer of its tail counter, so the two need no lock, only acquire/release
// ordering. A message travels as chunks that each carry (tag, message size, chunk length): the
// sender fills chunk k+1 while the receiver copies chunk k out, which pipelines large messages.
//
// Matching follows transports/transport.h: by (peer, tag), in posting order per (peer, tag).
// A message that arrives before its receive is posted is copied aside (the unexpected list)
// and matched later, except a message of more than one chunk while no receive from that peer
// is posted: it waits in the ring, so it is copied only once (see start_message); a receive larger than its message completes with op.received set; a
// smaller one fails with "message truncated". A send completes once its last byte is in the
// ring (the buffer may then be reused).
//
// The engine has no failure detection of its own: a dead peer simply stops moving its ring,
// and the caller's wait notices the process is gone (World::peer_dead) and cancels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace weft::shm {

struct RingShape {
  int chunks = 8;                   // chunks per ring (the pipeline depth)
  size_t chunk_bytes = 256 * 1024;  // payload bytes per chunk
};

class P2pRings {
 public:
  // Creates this rank's inbox under `inbox_name` (fails if it exists). `self` is this rank's
  // index in the transport's peer list, `local` the peers on this host (self included) and
  // `npeers` the size of the peer list.
  static std::unique_ptr<P2pRings> create(const std::string& inbox_name, int self, const std::vector<int>& local,
                                          int npeers, RingShape shape);
  ~P2pRings();
  P2pRings(const P2pRings&) = delete;
  P2pRings& operator=(const P2pRings&) = delete;

  const std::string& inbox_name() const { return inbox_name_; }
  // Maps the local peers' inboxes; names[i] belongs to local[i] (this rank's own is skipped).
  void attach(const std::vector<std::string>& names);
  // Removes this inbox's name once every peer has mapped it (the mappings stay valid), so
  // nothing is left in /dev/shm whatever happens to the process later.
  void unlink_inbox();

  // True when `peer` is on this host and its inbox is mapped.
  bool reaches(int peer) const;
  void send(transport::Op& op, int peer, transport::Tag tag, const void* buf, size_t bytes);
  void recv(transport::Op& op, int peer, transport::Tag tag, void* buf, size_t bytes);
  // Fails a pending op of this engine at once and returns true; false when the op is not
  // pending here. A send already partly in the ring is ended with a cancel marker, so the
  // receiver drops the partial message and the sender's buffer is never read again.
  bool cancel(transport::Op& op);
  // Moves chunks in and out of every ring. Returns true if anything moved.
  bool progress();
  // True while any send or receive of this engine is pending (the caller then keeps its
  // back-off short: a ring moves as fast as the peer copies, there is nothing to wake on).
  bool busy() const;
  std::string describe() const;

 private:
  struct Ring;     // a ring's control words and chunks in some inbox
  struct Pending;  // a posted send or receive
  struct Unexpected;
  struct Outbox;   // sends to one peer: the ring in the peer's inbox
  struct Inbox;    // receives from one peer: the ring in this inbox

  P2pRings(std::string name, char* base, size_t bytes, int self, std::vector<int> local, int npeers,
           RingShape shape);
  Ring ring_at(char* base, int ring_index) const;
  int ring_index_in(int receiver_local, int sender_local) const;
  bool push(Outbox& out);
  bool pull(Inbox& in);
  // Each returns false when the chunk must stay in the ring for now (a large message that no
  // receive wants yet).
  bool take_chunk(Inbox& in, const char* chunk);
  bool start_message(Inbox& in, transport::Tag tag, size_t bytes);

  std::string inbox_name_;
  char* base_;
  size_t bytes_;
  bool linked_ = true;
  int self_;
  std::vector<int> local_;            // world ranks on this host, ascending
  std::vector<int> local_index_of_;   // peer -> index in local_, or -1
  RingShape shape_;
  size_t ring_bytes_;                 // one ring's chunk area
  std::vector<std::pair<char*, size_t>> peer_maps_;
  std::vector<std::unique_ptr<Outbox>> out_;  // by local index (own entry empty)
  std::vector<std::unique_ptr<Inbox>> in_;
  mutable std::mutex mutex_;
  size_t pending_ = 0;  // posted and not finished, both directions
};

}  // namespace weft::shm
