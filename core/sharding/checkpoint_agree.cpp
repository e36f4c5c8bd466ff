#include "core/sharding/checkpoint_agree.h"

#include <algorithm>
#include <cstring>

#include "core/collectives/collectives.h"

namespace weft::shard {

void agree(Comm& comm, const std::optional<Error>& mine, const std::string& what) {
  const int n = comm.size();
  const int32_t status = mine ? static_cast<int32_t>(mine->status()) : 0;
  std::vector<int32_t> all(static_cast<size_t>(n));
  coll::allgather(comm, &status, all.data(), 1, DType::i32);
  const auto first = std::find_if(all.begin(), all.end(), [](int32_t s) { return s != 0; });
  if (first == all.end()) return;
  // Someone failed: every rank learns the words of the first failure (only on this path, so the
  // successful path costs one small allgather).
  const int culprit = static_cast<int>(first - all.begin());
  const std::string words =
      broadcast_string(comm, comm.rank() == culprit && mine ? mine->message() : std::string(), culprit);
  if (mine) throw *mine;
  fail(static_cast<Status>(*first), "%s failed on rank %d: %s", what.c_str(), culprit, words.c_str());
}

void share_outcome(Comm& comm, const std::optional<Error>& root_error, int root, const std::string& what) {
  int32_t status = comm.rank() == root && root_error ? static_cast<int32_t>(root_error->status()) : 0;
  coll::broadcast(comm, &status, 1, DType::i32, root);
  if (status == 0) return;
  const std::string words = broadcast_string(comm, comm.rank() == root ? root_error->message() : std::string(), root);
  if (comm.rank() == root) throw *root_error;
  fail(static_cast<Status>(status), "%s failed on rank %d: %s", what.c_str(), root, words.c_str());
}

std::string broadcast_string(Comm& comm, const std::string& s, int root) {
  uint64_t len = comm.rank() == root ? s.size() : 0;
  coll::broadcast(comm, &len, 1, DType::u64, root);
  std::string out = comm.rank() == root ? s : std::string(static_cast<size_t>(len), '\0');
  if (len) coll::broadcast(comm, out.data(), static_cast<size_t>(len), DType::u8, root);
  return out;
}

std::vector<std::string> gather_bytes(Comm& comm, const std::string& mine, int root) {
  const auto n = static_cast<size_t>(comm.size());
  const uint64_t len = mine.size();
  std::vector<uint64_t> lens(n);
  coll::allgather(comm, &len, lens.data(), 1, DType::u64);
  // A gather of equal blocks padded to the longest: one collective, and only the root receives
  // n blocks (an allgatherv would send every rank's list to every rank).
  const auto block = static_cast<size_t>(*std::max_element(lens.begin(), lens.end()));
  std::vector<char> send(std::max<size_t>(block, 1), 0);
  if (!mine.empty()) std::memcpy(send.data(), mine.data(), mine.size());
  const bool at_root = comm.rank() == root;
  std::vector<char> recv(at_root ? std::max<size_t>(block * n, 1) : 1);
  if (block) coll::gather(comm, send.data(), recv.data(), block, DType::u8, root);
  std::vector<std::string> out;
  if (!at_root) return out;
  out.resize(n);
  for (size_t r = 0; r < n; ++r) out[r].assign(recv.data() + r * block, static_cast<size_t>(lens[r]));
  return out;
}

}  // namespace weft::shard
