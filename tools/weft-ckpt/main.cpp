// weft-ckpt: look into a distributed checkpoint directory through the C ABI only (weft.h).
//
//   weft-ckpt info DIR                       tensors, dtypes, shapes, shard counts, bytes
//   weft-ckpt verify DIR                     reads every shard, checks lengths and CRC-32C
//   weft-ckpt export --safetensors OUT DIR   one safetensors file with every tensor
//
// Exit status: 0 done, 1 the checkpoint failed (the message names file and tensor), 2 usage.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "weft/weft.h"

namespace {

const char* dtype_text(weft_dtype_t d) {
  static const char* const kNames[] = {"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2",
                                       "i8",  "u8",  "i32", "u32",  "i64",    "u64"};
  const int i = static_cast<int>(d);
  return i >= 0 && i < WEFT_NUM_DTYPES ? kNames[i] : "?";
}

const char* const kUsage =
    "usage: weft-ckpt info DIR\n"
    "       weft-ckpt verify DIR\n"
    "       weft-ckpt export --safetensors OUT DIR\n";

const char* const kHelp =
    "  Looks into a distributed checkpoint directory (written by weft_checkpoint_save) through\n"
    "  the C ABI only; no communicator, no ranks.\n"
    "  info DIR        every tensor: name, dtype, global shape, shard count and bytes, then the total\n"
    "  verify DIR      reads every shard and checks its length and CRC-32C against the index\n"
    "  export --safetensors OUT DIR\n"
    "                  writes one safetensors file OUT with every tensor assembled from its shards\n"
    "  -h, --help      this text\n"
    "Exit status: 0 done, 1 the checkpoint failed (the message names the file and the tensor),\n"
    "2 usage.\n";

int usage(const char* why) {
  if (why) std::fprintf(stderr, "weft-ckpt: %s\n", why);
  std::fputs(kUsage, stderr);
  return 2;
}

// Prints the failure of `call` and returns 1.
int failed(const char* call, weft_status_t s) {
  std::fprintf(stderr, "weft-ckpt: %s: %s: %s\n", call, weft_status_string(s), weft_last_error());
  return 1;
}

struct Opened {
  weft_checkpoint_t ck = nullptr;
  ~Opened() { weft_checkpoint_close(ck); }
};

int info(const char* dir) {
  Opened o;
  if (weft_status_t s = weft_checkpoint_open(dir, &o.ck); s != WEFT_OK) return failed("open", s);
  size_t count = 0;
  if (weft_status_t s = weft_checkpoint_count(o.ck, &count); s != WEFT_OK) return failed("count", s);
  std::printf("checkpoint %s: %zu tensors\n", dir, count);
  std::printf("%-40s %-7s %-24s %7s %14s\n", "name", "dtype", "shape", "shards", "bytes");
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    weft_dtype_t dtype = WEFT_FLOAT32;
    int ndim = 0;
    int64_t shape[WEFT_TENSOR_MAX_DIMS] = {};
    size_t nshards = 0;
    if (weft_status_t s = weft_checkpoint_tensor(o.ck, i, &name, &dtype, &ndim, shape, &nshards); s != WEFT_OK) {
      return failed("tensor", s);
    }
    size_t elem = 0;
    weft_dtype_size(dtype, &elem);
    uint64_t bytes = elem;
    std::string dims = "[";
    for (int k = 0; k < ndim; ++k) {
      dims += (k ? ", " : "") + std::to_string(shape[k]);
      bytes *= static_cast<uint64_t>(shape[k]);
    }
    dims += "]";
    total += bytes;
    std::printf("%-40s %-7s %-24s %7zu %14" PRIu64 "\n", name, dtype_text(dtype), dims.c_str(), nshards, bytes);
  }
  std::printf("total %" PRIu64 " bytes\n", total);
  return 0;
}

int verify(const char* dir) {
  Opened o;
  if (weft_status_t s = weft_checkpoint_open(dir, &o.ck); s != WEFT_OK) return failed("open", s);
  if (weft_status_t s = weft_checkpoint_verify(o.ck); s != WEFT_OK) return failed("verify", s);
  size_t count = 0;
  weft_checkpoint_count(o.ck, &count);
  std::printf("OK: %s: %zu tensors, every shard's length and CRC-32C checked\n", dir, count);
  return 0;
}

int export_safetensors(const char* out, const char* dir) {
  Opened o;
  if (weft_status_t s = weft_checkpoint_open(dir, &o.ck); s != WEFT_OK) return failed("open", s);
  if (weft_status_t s = weft_checkpoint_export_safetensors(o.ck, out); s != WEFT_OK) return failed("export", s);
  std::printf("wrote %s\n", out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(nullptr);
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    std::fputs(kUsage, stdout);
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (cmd == "info" && argc == 3) return info(argv[2]);
  if (cmd == "verify" && argc == 3) return verify(argv[2]);
  if (cmd == "export" && argc == 5 && std::strcmp(argv[2], "--safetensors") == 0) {
    return export_safetensors(argv[3], argv[4]);
  }
  return usage(("bad arguments for '" + cmd + "'").c_str());
}
