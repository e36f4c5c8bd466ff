// The pipeline executor (weft/pipeline.h) with CUDA device-memory boundaries, run under weftrun
// (2 or more ranks): tests/multiproc/pipeline_model's 8-layer MLP trained with every generator,
// 10 SGD steps, on the communicator's stream (NULL) and, for 1F1B and ZB-V, on a user stream;
// this rank's layers must equal single-process training (the model's reference) to 1e-5
// relative per tensor (tests/multiproc/test_pipeline.cpp states the rounding argument). The
// stage callbacks copy boundary tensors between the device and the host (cudaMemcpyAsync on
// the pipeline's stream, then a synchronize) and compute on the host. Staged (every rank on
// GPU 0) or on NCCL (a GPU per rank; emulated: the stand-in), as the environment chooses.
//
// Then a failing callback: every rank returns an error within a short deadline.
//
// Exits 77 when no GPU is visible. WEFT_TEST_INJECT=1 corrupts one parameter of every compared
// tensor; the program then passes only when every corruption was caught.
#include <cuda_runtime_api.h>
#include <weft/weft.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "injection.h"
#include "mp_common.h"
#include "pipeline_model.h"
#include "rank_device.h"

namespace {

namespace mlp = mpt::mlp;
namespace pm = mpt::pipe;

int g_failures = 0, g_injected = 0, g_caught = 0, g_compared = 0;

#define WEFT_OK(call)                                                                            \
  do {                                                                                           \
    weft_status_t s_ = (call);                                                                   \
    if (s_ != WEFT_OK) {                                                                         \
      mpt::logf("FAIL %s: %s: %s\n", #call, mpt::status_name(s_), mpt::last_error().c_str());     \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

// Boundary tensors live on the device: callbacks copy them in and out on the pipeline's stream.
class DeviceIo final : public pm::BoundaryIo {
 public:
  explicit DeviceIo(cudaStream_t s) : stream_(s) {}
  void read(const weft_tensor_t& t, float* dst, size_t n) override {
    check(t);
    copy(dst, t.data, n, cudaMemcpyDeviceToHost);
  }
  void write(const weft_tensor_t& t, const float* src, size_t n) override {
    check(t);
    copy(t.data, src, n, cudaMemcpyHostToDevice);
  }

 private:
  void check(const weft_tensor_t& t) {
    if (t.device_type != WEFT_DEVICE_CUDA) {
      mpt::logf("FAIL a boundary tensor is not device memory (device_type %d)\n", int(t.device_type));
      std::exit(1);
    }
  }
  void copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    cudaError_t e = cudaMemcpyAsync(dst, src, n * sizeof(float), kind, stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) {
      mpt::logf("FAIL copying a boundary tensor: %s\n", cudaGetErrorString(e));
      std::exit(1);
    }
  }
  cudaStream_t stream_;
};

struct Gen {
  weft_schedule_kind_t kind;
  const char* name;
  int v;
};

void run(const Gen& g, bool user_stream, int device, const mpt::World& w, const mlp::Params& ref, int m) {
  const std::string what = std::string(g.name) + (user_stream ? ", user stream" : ", NULL stream");
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = w.size;
  sc.microbatches = m;
  sc.stages_per_rank = g.kind == WEFT_SCHEDULE_INTERLEAVED_1F1B ? g.v : 0;
  weft_schedule_t s = nullptr;
  WEFT_OK(weft_schedule_generate(g.kind, &sc, &s));
  cudaStream_t stream = nullptr;
  if (user_stream && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    mpt::logf("FAIL cudaStreamCreate\n");
    std::exit(1);
  }
  DeviceIo io(stream);
  pm::StageWorker worker(g.v * w.size, m, io);
  const std::vector<weft_tensor_t> b = worker.boundaries(WEFT_DEVICE_CUDA, device);
  weft_pipeline_config_t c = WEFT_PIPELINE_CONFIG_INIT;
  c.forward = c.backward = c.backward_input = c.backward_weight = &pm::StageWorker::callback;
  c.user_data = &worker;
  c.boundaries = b.data();
  c.nboundaries = b.size();
  c.stream = stream;
  c.record = 1;
  weft_pipeline_t pl = nullptr;
  WEFT_OK(weft_pipeline_create(w.comm, s, &c, &pl));
  for (int step = 0; step < 10; ++step) {
    worker.begin_step(step);
    weft_timeline_t t = nullptr;
    WEFT_OK(weft_pipeline_run(pl, &t));
    WEFT_OK(weft_timeline_destroy(t));
    worker.end_step();
  }
  for (int l = 0; l < pm::kLayers; ++l) {
    if (!worker.owns_layer(l)) continue;
    for (int k = 2 * l; k < 2 * l + 2; ++k) {
      std::vector<float> got = worker.params()[size_t(k)];
      const bool injected = weft::gputest::inject(got.data(), WEFT_FLOAT32, got.size());
      const bool ok = mlp::relative_error(got, ref[size_t(k)]) <= 1e-5;
      ++g_compared;
      if (injected) {
        ++g_injected;
        g_caught += ok ? 0 : 1;
      } else if (!ok) {
        ++g_failures;
        mpt::logf("FAIL %s: layer %d %s does not match the reference (relative error %.3g)\n", what.c_str(), l,
                  k % 2 ? "bias" : "weight", mlp::relative_error(got, ref[size_t(k)]));
      }
    }
  }
  WEFT_OK(weft_pipeline_destroy(pl));
  WEFT_OK(weft_schedule_destroy(s));
  if (stream) cudaStreamDestroy(stream);
}

// Rank 1's forward of (stage 1, micro-batch 1) fails on a communicator with a 3 s deadline:
// rank 1 must report the callback's error, every other rank an error of its own, none hang.
void failing_callback(int device, const mpt::World& w, int m) {
  weft_comm_config_t cc = WEFT_COMM_CONFIG_INIT;
  cc.timeout_ms = 3000;
  weft_comm_t comm = nullptr;
  WEFT_OK(weft_comm_split(w.comm, 0, w.rank, &comm, &cc));
  weft_schedule_config_t sc = WEFT_SCHEDULE_CONFIG_INIT;
  sc.ranks = w.size;
  sc.microbatches = m;
  weft_schedule_t s = nullptr;
  WEFT_OK(weft_schedule_generate(WEFT_SCHEDULE_ONE_F_ONE_B, &sc, &s));
  DeviceIo io(nullptr);
  pm::StageWorker worker(w.size, m, io);
  worker.fail_at(WEFT_ACTION_F, 1, 1);
  const std::vector<weft_tensor_t> b = worker.boundaries(WEFT_DEVICE_CUDA, device);
  weft_pipeline_config_t c = WEFT_PIPELINE_CONFIG_INIT;
  c.forward = c.backward = &pm::StageWorker::callback;
  c.user_data = &worker;
  c.boundaries = b.data();
  c.nboundaries = b.size();
  weft_pipeline_t pl = nullptr;
  WEFT_OK(weft_pipeline_create(comm, s, &c, &pl));
  worker.begin_step(0);
  const double t0 = mpt::now_s();
  const weft_status_t st = weft_pipeline_run(pl, nullptr);
  const double took = mpt::now_s() - t0;
  const std::string msg = mpt::last_error();
  mpt::logf("failing callback: %s: %s (%.2f s)\n", mpt::status_name(st), msg.c_str(), took);
  const bool callback_error = msg.find("forward callback failed: injected failure on purpose") != std::string::npos;
  const bool names_action = msg.find("rank " + std::to_string(w.rank) + ", action ") != std::string::npos;
  if (st == WEFT_OK || !names_action || took > 30.0 || (w.rank == 1) != callback_error) {
    ++g_failures;
    mpt::logf("FAIL failing callback: expected an error naming this rank's action%s\n",
              w.rank == 1 ? " with the callback's text" : "");
  }
  WEFT_OK(weft_pipeline_destroy(pl));
  WEFT_OK(weft_schedule_destroy(s));
  weft_comm_destroy(comm);  // broken by the failure
  WEFT_OK(weft_barrier(w.comm, nullptr, nullptr));  // rank 1 stays until the others are done
}

}  // namespace

int main() {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no GPU visible: skipped\n");
    return 77;
  }
  mpt::World w = mpt::init_world();
  const int device = weft::gputest::use_rank_device(w.rank, ndev);
  if (w.size < 2) {
    mpt::logf("needs 2 or more ranks: skipped\n");
    WEFT_OK(weft_comm_destroy(w.comm));
    return 77;
  }
  const Gen gens[] = {
      {WEFT_SCHEDULE_GPIPE, "GPipe", 1},   {WEFT_SCHEDULE_ONE_F_ONE_B, "1F1B", 1}, {WEFT_SCHEDULE_INTERLEAVED_1F1B, "interleaved", 2},
      {WEFT_SCHEDULE_ZB_H1, "ZB-H1", 1},   {WEFT_SCHEDULE_ZB_H2, "ZB-H2", 1},      {WEFT_SCHEDULE_ZB_V, "ZB-V", 2},
      {WEFT_SCHEDULE_DUALPIPE_V, "DualPipeV", 2},
  };
  const int m = 2 * w.size;
  const mlp::Params ref = pm::reference_training(10, m);
  int cases = 0;
  for (const Gen& g : gens) {
    run(g, false, device, w, ref, m);
    ++cases;
    if (g.kind == WEFT_SCHEDULE_ONE_F_ONE_B || g.kind == WEFT_SCHEDULE_ZB_V) {
      run(g, true, device, w, ref, m);
      ++cases;
    }
  }
  if (!mpt::inject_enabled()) failing_callback(device, w, m);
  WEFT_OK(weft_comm_destroy(w.comm));
  if (mpt::inject_enabled()) {
    mpt::logf("injected %d, caught %d\n", g_injected, g_caught);
    return g_injected > 0 && g_caught == g_injected && g_failures == 0 ? 0 : 1;
  }
  mpt::logf("%d cases, %d tensors compared, %d failures: the parameters match the reference\n", cases, g_compared,
            g_failures);
  return g_failures == 0 && g_compared > 0 ? 0 : 1;
}
