// A schedule as a FlatBuffers file (core/schema/schedule.fbs): serialize/deserialize and
// save/load. Reading never trusts the bytes: the verifier runs first (bounded depth, tables and
// size), then the identifier and major version are checked, then the lists are rebuilt by
// make_schedule's rules and the stored counts and placement must agree with them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/common/status.h"
#include "core/pipeline/schedule.h"
#include "core/schema/schedule_generated.h"

namespace weft::pipeline {

namespace {

constexpr uint16_t kFormatMajor = 1;
constexpr uint16_t kFormatMinor = 0;
// Far above any real schedule (a million actions take 12 MB) and small enough to read at once.
constexpr size_t kMaxFileBytes = size_t{1} << 30;
// One table per rank plus the root.
constexpr flatbuffers::uoffset_t kMaxTables = (1u << 20) + 16;

static_assert(sizeof(schema::ScheduleAction) == sizeof(Action), "the file's action struct mirrors Action");

// The identifier bytes as text, with anything unprintable escaped (it may be any file).
std::string printable(const uint8_t* p, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\'') {
      out.push_back(static_cast<char>(p[i]));
    } else {
      out.append(format("\\x%02x", p[i]));
    }
  }
  return out;
}

Schedule decode(const uint8_t* data, size_t size, const std::string& what) {
  if (!data && size > 0) fail(Status::invalid_argument, "%s: data is NULL with size %zu", what.c_str(), size);
  // Size prefix, root offset, identifier: anything shorter is no schedule file.
  if (size < 12) {
    fail(Status::invalid_argument, "%s (%zu bytes) is too short to be a weft schedule file", what.c_str(), size);
  }
  if (size > kMaxFileBytes) {
    fail(Status::invalid_argument, "%s is %zu bytes; a schedule file is at most %zu", what.c_str(), size, kMaxFileBytes);
  }
  // The verifier checks alignment relative to the buffer start and the accessors read scalars in
  // place: give the bytes 8-byte-aligned storage unless they already are.
  std::vector<uint64_t> storage;
  const uint8_t* buf = data;
  if (reinterpret_cast<uintptr_t>(buf) % 8 != 0) {
    storage.assign(size / 8 + 1, 0);
    std::memcpy(storage.data(), data, size);
    buf = reinterpret_cast<const uint8_t*>(storage.data());
  }
  if (!schema::SizePrefixedScheduleFileBufferHasIdentifier(buf)) {
    fail(Status::invalid_argument, "%s is not a weft schedule file: its file identifier is '%s', expected '%s'",
         what.c_str(), printable(buf + 8, 4).c_str(), schema::ScheduleFileIdentifier());
  }
  flatbuffers::Verifier verifier(buf, size, 16, kMaxTables);
  if (!schema::VerifySizePrefixedScheduleFileBuffer(verifier)) {
    fail(Status::invalid_argument, "%s (%zu bytes) failed FlatBuffers verification: corrupt or truncated", what.c_str(),
         size);
  }
  const schema::ScheduleFile* root = schema::GetSizePrefixedScheduleFile(buf);
  if (root->format_major() != kFormatMajor) {
    fail(Status::unsupported, "%s has format version %u.%u; this weft reads version %u.x", what.c_str(),
         root->format_major(), root->format_minor(), kFormatMajor);
  }
  const int ranks = root->ranks(), stages = root->stages(), mbs = root->microbatches();
  const auto* lists = root->lists();
  if (ranks < 1 || lists->size() != static_cast<flatbuffers::uoffset_t>(ranks)) {
    fail(Status::invalid_argument, "%s: ranks is %d but it holds %u action lists", what.c_str(), ranks, lists->size());
  }
  if (stages < 1 || root->stage_rank()->size() != static_cast<flatbuffers::uoffset_t>(stages)) {
    fail(Status::invalid_argument, "%s: stages is %d but the placement has %u entries", what.c_str(), stages,
         root->stage_rank()->size());
  }
  std::vector<std::vector<Action>> actions(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const auto* l = lists->Get(static_cast<flatbuffers::uoffset_t>(r))->actions();
    actions[static_cast<size_t>(r)].reserve(l->size());
    for (const schema::ScheduleAction* a : *l) {
      actions[static_cast<size_t>(r)].push_back(Action{static_cast<Kind>(a->kind()), a->stage(), a->microbatch()});
    }
  }
  Schedule s;
  try {
    s = make_schedule(std::move(actions), static_cast<Method>(root->method()));
  } catch (const Error& e) {
    fail(e.status(), "%s: %s", what.c_str(), e.message().c_str());
  }
  if (s.stages != stages || s.microbatches != mbs) {
    fail(Status::invalid_argument, "%s says %d stages and %d micro-batches, but its lists name %d and %d", what.c_str(),
         stages, mbs, s.stages, s.microbatches);
  }
  for (int st = 0; st < stages; ++st) {
    const int stored = root->stage_rank()->Get(static_cast<flatbuffers::uoffset_t>(st));
    if (stored != s.stage_rank[static_cast<size_t>(st)]) {
      fail(Status::invalid_argument, "%s places stage %d on rank %d, but its lists run the stage's first F on rank %d",
           what.c_str(), st, stored, s.stage_rank[static_cast<size_t>(st)]);
    }
  }
  return s;
}

}  // namespace

std::vector<uint8_t> serialize(const Schedule& s) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  std::vector<flatbuffers::Offset<schema::ScheduleRankList>> lists;
  lists.reserve(s.actions.size());
  for (const auto& list : s.actions) {
    std::vector<schema::ScheduleAction> v;
    v.reserve(list.size());
    for (const Action& a : list) v.emplace_back(static_cast<int32_t>(a.kind), a.stage, a.microbatch);
    lists.push_back(schema::CreateScheduleRankListDirect(fbb, &v));
  }
  auto root = schema::CreateScheduleFileDirect(fbb, kFormatMajor, kFormatMinor, static_cast<int32_t>(s.method), s.ranks,
                                               s.stages, s.microbatches, &s.stage_rank, &lists);
  // Size-prefixed: the verifier then also checks that the file is exactly as long as written.
  schema::FinishSizePrefixedScheduleFileBuffer(fbb, root);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

Schedule deserialize(const uint8_t* data, size_t size) { return decode(data, size, "the schedule buffer"); }

void save(const Schedule& s, const std::string& path) {
  const std::vector<uint8_t> bytes = serialize(s);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(Status::invalid_argument, "cannot create the schedule file '%s': %s", path.c_str(), std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      fail(Status::invalid_argument, "cannot write the schedule file '%s': %s", path.c_str(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    fail(Status::invalid_argument, "cannot write the schedule file '%s': %s", path.c_str(), std::strerror(errno));
  }
}

Schedule load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(Status::invalid_argument, "cannot open the schedule file '%s': %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    fail(Status::invalid_argument, "cannot read the schedule file '%s': %s", path.c_str(),
         S_ISREG(st.st_mode) ? std::strerror(err) : "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
    ::close(fd);
    fail(Status::invalid_argument, "the schedule file '%s' is %lld bytes; a schedule file is at most %zu", path.c_str(),
         static_cast<long long>(st.st_size), kMaxFileBytes);
  }
  std::vector<uint64_t> storage(static_cast<size_t>(st.st_size) / 8 + 1);
  auto* bytes = reinterpret_cast<uint8_t*>(storage.data());
  size_t done = 0;
  const size_t size = static_cast<size_t>(st.st_size);
  while (done < size) {
    const ssize_t n = ::read(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(Status::invalid_argument, "cannot read the schedule file '%s': %s", path.c_str(), std::strerror(err));
    }
    if (n == 0) break;  // shorter than fstat said: the verifier judges what is there
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return decode(bytes, done, std::string("the schedule file '").append(path).append("'"));
}

}  // namespace weft::pipeline
