// Every algorithm that WEFT_ALGO_* can force runs when forced, and the log proves it: for each
// collective and each accepted name, a communicator dup'ed with the variable set runs the
// collective once (a small checked result), and weft's WEFT_DEBUG=info line "<collective> uses
// <algorithm>" must name the forced algorithm and no other. A forced shm on a communicator that
// cannot use shared memory (WEFT_SHM=0) must fail with WEFT_ERR_UNSUPPORTED saying why, on every
// rank, instead of silently running another algorithm.
//
// Needs WEFT_DEBUG=info in the environment at start (the ctest sets it): weft reads it once.
// The log is captured by pointing this process's stderr at a temporary file around each call.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mp_common.h"
#include "mp_gtest.h"

namespace {

struct Forcing {
  const char* collective;
  const char* variable;
  std::vector<const char*> algorithms;
};

const std::vector<Forcing>& forcings() {
  static const std::vector<Forcing> f = {
      {"allreduce", "WEFT_ALGO_ALLREDUCE", {"recursive_doubling", "ring", "rabenseifner", "shm"}},
      {"broadcast", "WEFT_ALGO_BROADCAST", {"binomial", "scatter_allgather", "shm"}},
      {"reduce", "WEFT_ALGO_REDUCE", {"binomial", "reduce_scatter_gather", "shm"}},
      {"allgather", "WEFT_ALGO_ALLGATHER", {"ring", "bruck", "shm"}},
      {"reduce_scatter", "WEFT_ALGO_REDUCE_SCATTER", {"ring", "shm"}},
      {"alltoall", "WEFT_ALGO_ALLTOALL", {"pairwise", "shm"}},
      {"barrier", "WEFT_ALGO_BARRIER", {"dissemination", "shm"}},
  };
  return f;
}

// stderr goes to a temporary file between start() and stop(); stop() returns what was written.
class StderrCapture {
 public:
  void start() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    ASSERT_NE(file_, nullptr);
    saved_ = dup(2);
    ASSERT_GE(saved_, 0);
    ASSERT_GE(dup2(fileno(file_), 2), 0);
  }
  std::string stop() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    std::string text;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) text.append(buf, n);
    std::fclose(file_);
    return text;
  }

 private:
  FILE* file_ = nullptr;
  int saved_ = -1;
};

// A communicator created while `variable` (and optionally WEFT_SHM) have the given values.
weft_comm_t dup_with(weft_comm_t world, const char* variable, const char* value, const char* shm) {
  setenv(variable, value, 1);
  if (shm) setenv("WEFT_SHM", shm, 1);
  weft_comm_t comm = nullptr;
  weft_status_t s = weft_comm_dup(world, &comm);
  unsetenv(variable);
  if (shm) unsetenv("WEFT_SHM");
  EXPECT_EQ(s, WEFT_OK) << mpt::last_error();
  return comm;
}

// Runs the collective once on small data with a result every rank can check.
weft_status_t run_once(const char* collective, weft_comm_t comm, int rank, int n, std::string* wrong) {
  const size_t count = 1000;  // per rank or per block; large enough for every algorithm's blocks
  std::vector<float> send(count * static_cast<size_t>(n)), recv(count * static_cast<size_t>(n), -1.0f);
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(rank + 1) + static_cast<float>(i % 7);
  const std::string c = collective;
  weft_status_t s;
  std::vector<float> expect;
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  if (c == "allreduce" || c == "reduce") {
    s = c == "allreduce" ? weft_allreduce(send.data(), recv.data(), count, WEFT_FLOAT32, WEFT_SUM, comm, nullptr, nullptr)
                         : weft_reduce(send.data(), recv.data(), count, WEFT_FLOAT32, WEFT_SUM, 0, comm, nullptr, nullptr);
    if (c == "allreduce" || rank == 0) {
      for (size_t i = 0; i < count; ++i) expect.push_back(ranks_sum + static_cast<float>(n * static_cast<int>(i % 7)));
    }
  } else if (c == "broadcast") {
    if (rank == 0) recv.assign(send.begin(), send.begin() + static_cast<long>(count));
    s = weft_broadcast(recv.data(), count, WEFT_FLOAT32, 0, comm, nullptr, nullptr);
    for (size_t i = 0; i < count; ++i) expect.push_back(1.0f + static_cast<float>(i % 7));
  } else if (c == "allgather") {
    s = weft_allgather(send.data(), recv.data(), count, WEFT_FLOAT32, comm, nullptr, nullptr);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) expect.push_back(static_cast<float>(r + 1) + static_cast<float>(i % 7));
    }
  } else if (c == "reduce_scatter") {
    s = weft_reduce_scatter(send.data(), recv.data(), count, WEFT_FLOAT32, WEFT_SUM, comm, nullptr, nullptr);
    for (size_t i = 0; i < count; ++i) {
      const size_t at = static_cast<size_t>(rank) * count + i;
      expect.push_back(ranks_sum + static_cast<float>(n * static_cast<int>(at % 7)));
    }
  } else if (c == "alltoall") {
    s = weft_alltoall(send.data(), recv.data(), count, WEFT_FLOAT32, comm, nullptr, nullptr);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        const size_t at = static_cast<size_t>(rank) * count + i;  // block `rank` of rank r's input
        expect.push_back(static_cast<float>(r + 1) + static_cast<float>(at % 7));
      }
    }
  } else {
    s = weft_barrier(comm, nullptr, nullptr);
  }
  for (size_t i = 0; s == WEFT_OK && i < expect.size(); ++i) {
    if (recv[i] != expect[i]) {
      *wrong = "element " + std::to_string(i) + " is " + std::to_string(recv[i]) + ", expected " +
               std::to_string(expect[i]);
      break;
    }
  }
  return s;
}

// The algorithms the log says `collective` used ("... : allreduce uses ring").
std::vector<std::string> algorithms_logged(const std::string& log, const std::string& collective) {
  std::vector<std::string> found;
  const std::string key = ": " + collective + " uses ";
  for (size_t at = log.find(key); at != std::string::npos; at = log.find(key, at + 1)) {
    size_t b = at + key.size(), e = log.find_first_of(" \n", b);
    found.push_back(log.substr(b, e == std::string::npos ? std::string::npos : e - b));
  }
  return found;
}

class Algorithms : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* d = std::getenv("WEFT_DEBUG");
    ASSERT_TRUE(d && std::string(d).find("info") != std::string::npos)
        << "run with WEFT_DEBUG=info (the ctest sets it): the test reads weft's algorithm log";
  }
};

TEST_F(Algorithms, EveryForcedAlgorithmRunsAndIsLogged) {
  mpt::World& w = mpt::g_world;
  if (w.size < 2) GTEST_SKIP() << "one rank: every algorithm is a local copy";
  int checked = 0;
  for (const Forcing& f : forcings()) {
    for (const char* algo : f.algorithms) {
      SCOPED_TRACE(std::string(f.variable) + "=" + algo);
      weft_comm_t comm = dup_with(w.comm, f.variable, algo, nullptr);
      ASSERT_NE(comm, nullptr);
      StderrCapture cap;
      cap.start();
      std::string wrong;
      weft_status_t s = run_once(f.collective, comm, w.rank, w.size, &wrong);
      std::string log = cap.stop();
      ASSERT_EQ(s, WEFT_OK) << mpt::last_error();
      EXPECT_EQ(wrong, "");
      std::vector<std::string> used = algorithms_logged(log, f.collective);
      ASSERT_EQ(used.size(), 1u) << "the log should name one algorithm for " << f.collective << ":\n" << log;
      EXPECT_EQ(used[0], algo) << log;
      ++checked;
      ASSERT_EQ(weft_comm_destroy(comm), WEFT_OK);
    }
  }
  EXPECT_EQ(checked, 19);  // every name of forcings()
}

TEST_F(Algorithms, ForcedShmWithoutSharedMemoryIsAnError) {
  mpt::World& w = mpt::g_world;
  for (const Forcing& f : forcings()) {
    SCOPED_TRACE(std::string(f.variable) + "=shm with WEFT_SHM=0");
    weft_comm_t comm = dup_with(w.comm, f.variable, "shm", "0");
    ASSERT_NE(comm, nullptr);
    std::string wrong;
    weft_status_t s = run_once(f.collective, comm, w.rank, w.size, &wrong);
    if (w.size == 1) {
      EXPECT_EQ(s, WEFT_OK) << "one rank has nothing to share: " << mpt::last_error();
    } else {
      EXPECT_EQ(s, WEFT_ERR_UNSUPPORTED) << "a forced algorithm that cannot run must not fall back";
      const std::string msg = mpt::last_error();
      EXPECT_NE(msg.find(f.variable), std::string::npos) << msg;
      EXPECT_NE(msg.find("WEFT_SHM=0"), std::string::npos) << msg;
    }
    ASSERT_EQ(weft_comm_destroy(comm), WEFT_OK);
  }
}

}  // namespace
