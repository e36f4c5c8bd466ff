// Writes the fuzz targets' seed inputs (valid encodings made by weft's own encoders) into
// tests/fuzz/corpus/<target>/seed-*; libFuzzer grows the corpora from them (scripts/fuzz). Run
// once from the repository root when a format changes:
//   clang++-14 -std=c++20 -I. -Ibuild-fuzz/generated tests/fuzz/make_seeds.cpp <sources> -o make_seeds
// with the union of the targets' sources in scripts/fuzz (see tests/fuzz/README.md).
#include <cstdio>
#include <string>
#include <vector>

#include "core/bootstrap/rank_record.h"
#include "core/bootstrap/store.h"
#include "core/bootstrap/store_wire.h"
#include "core/bootstrap/unique_id.h"
#include "core/pipeline/generators.h"
#include "core/pipeline/schedule.h"
#include "core/sharding/checkpoint_index.h"

using namespace weft;

namespace {

void write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string path = "tests/fuzz/corpus/" + target + "/seed-" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

void schedules() {
  using namespace weft::pipeline;
  struct Case {
    Method m;
    int ranks, mbs;
    bool reduce;
  };
  const Case cases[] = {{Method::gpipe, 2, 2, false},        {Method::one_f_one_b, 4, 4, true},
                        {Method::interleaved_1f1b, 2, 4, false}, {Method::zb_h1, 2, 3, false},
                        {Method::zb_v, 2, 4, true},            {Method::dualpipe_v, 2, 4, false}};
  for (const Case& c : cases) {
    GenerateOptions o;
    o.ranks = c.ranks;
    o.microbatches = c.mbs;
    o.reduce_grad = c.reduce;
    Schedule s = generate(c.m, o);
    const std::string name = std::string(method_name(c.m)) + "-" + std::to_string(c.ranks);
    const std::vector<uint8_t> bin = serialize(s);
    write("schedule_file", name, std::string(bin.begin(), bin.end()));
    write("schedule_csv", name, to_csv(s, false));
    write("schedule_csv", name + "-compute", to_csv(s, true));
  }
  write("schedule_csv", "torch-style", "\"0F0\", None ,0F1\n1F0,,1B0\r\n\r\n");
}

void checkpoint() {
  using namespace weft::shard;
  CheckpointIndex ix;
  ix.save_id = "seed";
  ix.nranks = 2;
  StoredTensor w{"w", DType::f32, {4, 5}, {}};
  for (int r = 0; r < 2; ++r) {
    StoredShard s;
    s.box = Box{{2 * r, 0}, {2, 5}};
    s.file = "rank" + std::to_string(r) + ".bin";
    s.byte_length = 40;
    s.chunk_bytes = 16;
    s.chunk_crcs = {1, 2, 3};
    w.shards.push_back(s);
  }
  StoredTensor b{"b", DType::bf16, {3}, {}};
  StoredShard s;
  s.box = Box{{0}, {3}};
  s.file = "rank0.bin";
  s.byte_offset = 40;
  s.byte_length = 6;
  s.chunk_crcs = {7};
  b.shards.push_back(s);
  ix.tensors = {w, b};
  write("checkpoint_index", "two-tensors", encode_index(ix));
  ix.tensors.clear();
  write("checkpoint_index", "empty", encode_index(ix));
}

void bootstrap_seeds() {
  using namespace weft::bootstrap;
  RankRecord r;
  r.rank = 1;
  r.nranks = 4;
  r.version_code = 100;
  r.abi_version = 1;
  r.host_name = "node-a";
  r.boot_id = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  r.pid_ns = 4026531836;
  r.pid = 1234;
  r.device = 0;
  r.transport_address = std::string("\x01\x02tcp:10.0.0.1:4000", 20);
  write("rank_record", "full", encode_rank_record(r));
  r.device = -1;
  r.transport_address.clear();
  write("rank_record", "host-only", encode_rank_record(r));

  char id[kUniqueIdBytes];
  encode_unique_id(UniqueId{"10.1.2.3", 29500, "0123456789abcdef0123456789abcdef"}, id);
  write("unique_id", "ipv4", std::string(id, kUniqueIdBytes));
  encode_unique_id(UniqueId{"node-17.cluster.example", 1, ""}, id);
  write("unique_id", "no-secret", std::string(id, kUniqueIdBytes));

  // A connection: handshake, then one frame of each op.
  std::string conn(wire::kMagic, sizeof(wire::kMagic));
  wire::put_u32(conn, wire::kProtocolVersion);
  wire::put_bytes(conn, "job-secret");
  auto frame = [&](const std::string& f) {
    wire::put_u32(conn, static_cast<uint32_t>(f.size()));
    conn += f;
  };
  std::string f;
  wire::put_u8(f, static_cast<uint8_t>(wire::Op::set));
  wire::put_bytes(f, "rank/0");
  wire::put_bytes(f, "value");
  frame(f);
  f.clear();
  wire::put_u8(f, static_cast<uint8_t>(wire::Op::get));
  wire::put_u64(f, 1000);
  wire::put_bytes(f, "rank/1");
  frame(f);
  f.clear();
  wire::put_u8(f, static_cast<uint8_t>(wire::Op::add));
  wire::put_bytes(f, "counter");
  wire::put_u64(f, static_cast<uint64_t>(-3));
  frame(f);
  f.clear();
  wire::put_u8(f, static_cast<uint8_t>(wire::Op::wait));
  wire::put_u64(f, 0);
  wire::put_u32(f, 2);
  wire::put_bytes(f, "a");
  wire::put_bytes(f, "b");
  frame(f);
  write("store_wire", "one-of-each", conn);
}

}  // namespace

int main() {
  schedules();
  checkpoint();
  bootstrap_seeds();
  return 0;
}
