// How the pipelined point-to-point passes cut a block into chunks: chunk c of a block of `len`
// elements covers [c * elems, min(len, (c + 1) * elems)). Sender and receiver of a block know
// its length, so both cut it alike and each chunk is one message. Chunks only change when bytes
// move, never which operands meet in a reduction, so results stay bitwise identical.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/comm/channel.h"

namespace weft::coll {

struct Chunking {
  size_t elems;  // elements per chunk (SIZE_MAX: whole blocks)

  // From the communicator's WEFT_P2P_CHUNK_BYTES; a chunk holds at least one element.
  static Chunking of(Channel& ch, size_t elem) {
    size_t bytes = ch.comm().config().algorithms.p2p_chunk_bytes;
    if (bytes == 0) return {SIZE_MAX};
    return {bytes / elem ? bytes / elem : 1};
  }
  size_t count(size_t len) const { return len ? (len - 1) / elems + 1 : 0; }
  size_t offset(size_t c) const { return c * elems; }
  size_t length(size_t len, size_t c) const {
    size_t off = c * elems;
    return len - off < elems ? len - off : elems;
  }
};

}  // namespace weft::coll
