#include "checkpoint_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "mp_common.h"

namespace ckt {

weft_placement_t S(int dim) { return {WEFT_SHARD, dim, WEFT_SUM}; }
weft_placement_t R() { return {WEFT_REPLICATE, 0, WEFT_SUM}; }
weft_placement_t Psum() { return {WEFT_PARTIAL, 0, WEFT_SUM}; }

unsigned char pattern_byte(uint32_t seed, int64_t linear, size_t k) {
  return static_cast<unsigned char>((linear * 131 + static_cast<int64_t>(k) * 29 + seed * 7 + 13) % 251);
}
float partial_term(int64_t linear, int member) { return static_cast<float>(linear % 5 + member); }
float partial_value(int64_t linear, int members) {
  return static_cast<float>(members * (linear % 5) + members * (members - 1) / 2);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

Box ref_box(const Shape& global, const std::vector<int>& mesh_shape, const Layout& layout,
            const std::vector<int>& coords) {
  Box b{Shape(global.size(), 0), global};
  for (size_t m = 0; m < layout.size(); ++m) {
    if (layout[m].kind != WEFT_SHARD) continue;
    const auto d = static_cast<size_t>(layout[m].dim);
    const int64_t n = b.shape[d], k = mesh_shape[m];
    const int64_t c = (n + k - 1) / k;
    const int64_t start = std::min<int64_t>(coords[m] * c, n);
    b.offset[d] += start;
    b.shape[d] = std::min<int64_t>(c, n - start);
  }
  return b;
}

size_t ref_shard_count(const Shape& global, const std::vector<int>& mesh_shape, const Layout& layout) {
  std::vector<int> coords(mesh_shape.size(), 0);
  size_t count = 0;
  for (;;) {
    bool writer = true;
    for (size_t m = 0; m < layout.size(); ++m)
      if (layout[m].kind != WEFT_SHARD && coords[m] != 0) writer = false;
    if (writer && numel(ref_box(global, mesh_shape, layout, coords).shape) > 0) ++count;
    size_t m = mesh_shape.size();
    for (; m-- > 0;) {
      if (++coords[m] < mesh_shape[m]) break;
      coords[m] = 0;
    }
    if (m == static_cast<size_t>(-1)) return count;
  }
}

Piece::Piece(weft_dtype_t dt, Shape shape, bool transposed) : dt_(dt), shape_(std::move(shape)) {
  weft_dtype_size(dt, &esize_);
  strides_.assign(shape_.size(), 1);
  if (transposed) {  // column-major: dim 0 fastest
    for (size_t k = 1; k < shape_.size(); ++k) strides_[k] = strides_[k - 1] * std::max<int64_t>(1, shape_[k - 1]);
  } else {
    for (size_t k = shape_.size(); k-- > 1;) strides_[k - 1] = strides_[k] * std::max<int64_t>(1, shape_[k]);
  }
  mem_.assign(static_cast<size_t>(std::max<int64_t>(1, numel(shape_))) * esize_, 0xCD);
}

weft_tensor_t Piece::view() {
  weft_tensor_t v{};
  v.data = mem_.data();
  v.device_type = WEFT_DEVICE_CPU;
  v.ndim = static_cast<int>(shape_.size());
  v.dtype = dt_;
  v.shape = shape_.data();
  v.strides = strides_.data();
  return v;
}

unsigned char* Piece::at(const int64_t* idx) {
  int64_t off = 0;
  for (size_t k = 0; k < shape_.size(); ++k) off += idx[k] * strides_[k];
  return mem_.data() + static_cast<size_t>(off) * esize_;
}

Mesh::~Mesh() {
  if (handle) weft_mesh_destroy(handle);
}

void make_mesh(Mesh& m, weft_comm_t comm, const std::vector<int>& shape, const std::vector<int>* ranks) {
  weft_mesh_config_t cfg = WEFT_MESH_CONFIG_INIT;
  if (ranks) {
    cfg.ranks = ranks->data();
    cfg.nranks = ranks->size();
  }
  MPT_OK(weft_mesh_create(comm, static_cast<int>(shape.size()), shape.data(), nullptr, &cfg, &m.handle));
  m.shape = shape;
  int member = 0;
  MPT_OK(weft_mesh_is_member(m.handle, &member));
  m.coords.clear();
  if (member) {
    m.coords.resize(shape.size());
    MPT_OK(weft_mesh_coords(m.handle, m.coords.data(), nullptr));
  }
}

Tensor::~Tensor() {
  weft_sharded_destroy(handle);
  delete piece;
}

namespace {

// The mesh dim that is P(sum) in layout, -1 if none.
int partial_dim(const Layout& layout) {
  for (size_t m = 0; m < layout.size(); ++m)
    if (layout[m].kind == WEFT_PARTIAL) return static_cast<int>(m);
  return -1;
}

// Writes into `out` (esize bytes) what element `linear` must hold: its value, or the term of
// member `member` of a PARTIAL(sum) dim of `members` (member < 0: the reduced value).
void expected_bytes(const Spec& spec, size_t esize, int64_t linear, int member, int members, unsigned char* out) {
  if (spec.partial_members > 0) {
    const float v = member < 0 ? partial_value(linear, members) : partial_term(linear, member);
    std::memcpy(out, &v, sizeof v);
    return;
  }
  for (size_t k = 0; k < esize; ++k) out[k] = pattern_byte(spec.seed, linear, k);
}

int64_t linear_of(const Shape& global, const Box& box, const int64_t* idx) {
  int64_t lin = 0;
  for (size_t k = 0; k < global.size(); ++k) lin = lin * global[k] + box.offset[k] + idx[k];
  return lin;
}

}  // namespace

void make_tensor(Tensor& t, const Spec& spec, const Mesh& mesh, const Layout& layout, bool transposed, bool fill) {
  t.spec = spec;
  t.layout = layout;
  t.mesh = &mesh;
  weft_sharded_config_t cfg = WEFT_SHARDED_CONFIG_INIT;
  cfg.name = spec.name.c_str();
  weft_tensor_t view{};
  const bool member = !mesh.coords.empty();
  if (member) {
    t.box = ref_box(spec.global, mesh.shape, layout, mesh.coords);
    t.piece = new Piece(spec.dtype, t.box.shape, transposed);
    view = t.piece->view();
    if (fill) {
      const int pd = partial_dim(layout);
      const int member_at = pd >= 0 ? mesh.coords[static_cast<size_t>(pd)] : -1;
      for_each_index(t.box.shape, [&](const int64_t* idx) {
        expected_bytes(spec, t.piece->esize(), linear_of(spec.global, t.box, idx), member_at, 0, t.piece->at(idx));
      });
    }
  }
  MPT_OK(weft_sharded_create(mesh.handle, static_cast<int>(spec.global.size()), spec.global.data(), spec.dtype,
                             layout.data(), member ? &view : nullptr, &cfg, &t.handle));
}

int64_t count_wrong(const Tensor& t, std::string* first) {
  if (!t.piece) return 0;
  int64_t wrong = 0;
  const size_t es = t.piece->esize();
  // A P(sum) dim of the destination: the value at coordinate 0, zeros elsewhere (mesh.h).
  bool zeros = false;
  for (size_t m = 0; m < t.layout.size(); ++m)
    if (t.layout[m].kind == WEFT_PARTIAL && t.layout[m].op == WEFT_SUM && t.mesh->coords[m] != 0) zeros = true;
  const int members = t.spec.partial_members;
  std::vector<unsigned char> want(es);
  for_each_index(t.box.shape, [&](const int64_t* idx) {
    const int64_t lin = linear_of(t.spec.global, t.box, idx);
    if (zeros) {
      std::fill(want.begin(), want.end(), 0);
    } else {
      expected_bytes(t.spec, es, lin, -1, members, want.data());
    }
    const unsigned char* got = const_cast<Piece*>(t.piece)->at(idx);
    if (std::memcmp(got, want.data(), es) != 0) {
      if (wrong++ == 0 && first) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "global element %lld: byte 0 is 0x%02x, expected 0x%02x",
                      static_cast<long long>(lin), got[0], want[0]);
        *first = "'" + t.spec.name + "' " + buf;
      }
    }
  });
  return wrong;
}

weft_comm_t split_first(weft_comm_t comm, int n) {
  int rank = 0;
  MPT_OK(weft_comm_rank(comm, &rank));
  weft_comm_t sub = nullptr;
  MPT_OK(weft_comm_split(comm, rank < n ? 0 : WEFT_SPLIT_NOCOLOR, rank, &sub, nullptr));
  return sub;
}

std::string shared_tempdir(weft_comm_t comm, const char* tag) {
  int rank = 0;
  MPT_OK(weft_comm_rank(comm, &rank));
  char path[512] = {0};
  if (rank == 0) {
    const char* base = std::getenv("TMPDIR");
    std::snprintf(path, sizeof path, "%s/weft-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!::mkdtemp(path)) mpt::die("mkdtemp(%s): %s", path, std::strerror(errno));
  }
  MPT_OK(weft_broadcast(path, sizeof path, WEFT_UINT8, 0, comm, nullptr, nullptr));
  return path;
}

void remove_tree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

std::vector<std::string> list_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> data_files(const std::string& dir, uint64_t* total_bytes) {
  std::vector<std::string> out;
  uint64_t total = 0;
  for (const std::string& f : list_files(dir)) {
    if (f.rfind("data-", 0) != 0) continue;
    out.push_back(f);
    total += std::filesystem::file_size(dir + "/" + f);
  }
  if (total_bytes) *total_bytes = total;
  return out;
}

void flip_byte(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) mpt::die("open %s: %s", path.c_str(), std::strerror(errno));
  unsigned char b = 0;
  if (::pread(fd, &b, 1, static_cast<off_t>(offset)) != 1) mpt::die("pread %s", path.c_str());
  b ^= 0x40;
  if (::pwrite(fd, &b, 1, static_cast<off_t>(offset)) != 1) mpt::die("pwrite %s", path.c_str());
  ::close(fd);
}

void truncate_file(const std::string& path, uint64_t size) {
  if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) mpt::die("truncate %s: %s", path.c_str(), std::strerror(errno));
}

void write_file(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) mpt::die("fopen %s: %s", path.c_str(), std::strerror(errno));
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

void barrier(weft_comm_t comm) { MPT_OK(weft_barrier(comm, nullptr, nullptr)); }

}  // namespace ckt
