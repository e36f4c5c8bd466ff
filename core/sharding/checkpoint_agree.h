// How the ranks of a checkpoint save agree (core/sharding/checkpoint_save.cpp): a failure on
// any rank fails the save on every rank, with the failing rank's own words, so that no rank
// returns OK for a checkpoint that was not written and none waits for a rank that gave up.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/comm/comm.h"
#include "core/common/status.h"

namespace weft::shard {

// Runs f(), turning whatever it throws into an Error (bad_alloc -> out_of_memory, any other
// exception -> internal) so that it can be shared with the other ranks.
template <typename F>
std::optional<Error> capture(F&& f) {
  try {
    f();
    return std::nullopt;
  } catch (const Error& e) {
    return e;
  } catch (const std::bad_alloc&) {
    return Error(Status::out_of_memory, "out of memory");
  } catch (const std::exception& e) {
    return Error(Status::internal, std::string("internal error: ") + e.what());
  }
}

// Collective over comm: returns when no rank passed an error. Otherwise throws on every rank:
// its own error where it has one, else the lowest failing rank's status with "<what> failed on
// rank R: <its message>".
void agree(Comm& comm, const std::optional<Error>& mine, const std::string& what);

// Collective over comm: root's outcome reaches every rank (root throws its own error, the
// others "<what> failed on rank <root>: <message>").
void share_outcome(Comm& comm, const std::optional<Error>& root_error, int root, const std::string& what);

// Collective over comm: every rank's bytes, at root (index = rank); empty elsewhere.
std::vector<std::string> gather_bytes(Comm& comm, const std::string& mine, int root);

// Collective over comm: root's string on every rank.
std::string broadcast_string(Comm& comm, const std::string& s, int root);

}  // namespace weft::shard
