// kill -9 during a checkpoint save: the previous checkpoint must stay intact and loadable, and
// the interrupted save must leave no index. Also the program that writes the checkpoint the
// tools test (checkpoint_tools_test.py) reads.
//
// The driver runs the jobs through weftrun, one after another:
//   1. save A on N ranks;
//   2. save B on N ranks with WEFT_TEST_CHECKPOINT_KILL=<victim>:<point> (core/sharding/
//      checkpoint_files.h): the victim SIGKILLs itself in the middle of the save ("data": after
//      the first block of its data file; "index": rank 0, temporary index written, not renamed);
//      the job must fail and must have left files of B behind (proof the kill hit mid-save);
//   3. load on M ranks (other layouts): every value is A's, and A verifies;
//   4. save C on N ranks, load it on M: it works, and nothing of B is left in the directory.
//
//   weft_mp_checkpoint_kill --driver WEFTRUN -n N -m M --victim R --point data|index DIR
//   weftrun -n N weft_mp_checkpoint_kill --save A|B|C DIR       (one job of the driver)
//   weftrun -n M weft_mp_checkpoint_kill --check A|C DIR
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "checkpoint_util.h"
#include "mp_common.h"

extern char** environ;

using namespace ckt;

namespace {

// The tensors of save `letter` on n ranks (checkpoint_tools_test.py knows the same list):
// name, dtype, shape, seed (100 x (letter - 'A' + 1) + position), save layout, check layout.
struct Item {
  Spec spec;
  Layout save, check;
  bool transposed;
};
std::vector<Item> tensors_of(char letter, int n) {
  const uint32_t base = 100u * static_cast<uint32_t>(letter - 'A' + 1);
  return {
      {{"layer.w", WEFT_FLOAT32, {9, 4}, base + 0}, {S(0)}, {S(1)}, false},
      {{"layer.b", WEFT_BFLOAT16, {4}, base + 1}, {R()}, {S(0)}, false},
      {{"emb", WEFT_UINT8, {5, 2}, base + 2}, {S(1)}, {S(0)}, true},
      {{"grad", WEFT_FLOAT32, {4, 3}, base + 3, n}, {Psum()}, {S(0)}, false},
      {{"big", WEFT_FLOAT32, {3, 400000}, base + 4}, {S(1)}, {S(0)}, true},  // several 1 MiB chunks per shard
      {{"step", WEFT_INT64, {}, base + 5}, {R()}, {R()}, false},
  };
}

int save_job(char letter, const std::string& dir) {
  mpt::World w = mpt::init_world();
  int rc = 0;
  {
    Mesh mesh;
    make_mesh(mesh, w.comm, {w.size});
    std::vector<std::unique_ptr<Tensor>> ts;
    std::vector<const char*> names;
    std::vector<weft_sharded_t> handles;
    for (const Item& it : tensors_of(letter, w.size)) {
      ts.push_back(std::make_unique<Tensor>());
      make_tensor(*ts.back(), it.spec, mesh, it.save, it.transposed, true);
      names.push_back(ts.back()->spec.name.c_str());
      handles.push_back(ts.back()->handle);
    }
    const weft_checkpoint_config_t cfg = WEFT_CHECKPOINT_CONFIG_INIT;  // with fsync
    const weft_status_t s = weft_checkpoint_save(w.comm, dir.c_str(), names.data(), handles.data(), ts.size(), &cfg);
    if (s != WEFT_OK) {
      mpt::logf("save %c: %s: %s", letter, mpt::status_name(s), mpt::last_error().c_str());
      rc = 1;
    }
  }
  weft_comm_destroy(w.comm);
  return rc;
}

// Every value loaded on this job's ranks is save `letter`'s; rank 0 also verifies the files.
int check_job(char letter, int n_saved, const std::string& dir) {
  mpt::World w = mpt::init_world();
  int wrong = 0;
  {
    Mesh mesh;
    make_mesh(mesh, w.comm, {w.size});
    std::vector<std::unique_ptr<Tensor>> ts;
    std::vector<const char*> names;
    std::vector<weft_sharded_t> handles;
    for (const Item& it : tensors_of(letter, n_saved)) {
      ts.push_back(std::make_unique<Tensor>());
      make_tensor(*ts.back(), it.spec, mesh, it.check, it.transposed, false);
      names.push_back(ts.back()->spec.name.c_str());
      handles.push_back(ts.back()->handle);
    }
    weft_status_t s = weft_checkpoint_load(dir.c_str(), names.data(), handles.data(), ts.size(), nullptr);
    if (s != WEFT_OK) {
      mpt::logf("FAIL load %c: %s: %s", letter, mpt::status_name(s), mpt::last_error().c_str());
      ++wrong;
    }
    for (const auto& t : ts) {
      std::string first;
      if (s == WEFT_OK && count_wrong(*t, &first) != 0) {
        mpt::logf("FAIL load %c: %s", letter, first.c_str());
        ++wrong;
      }
    }
    if (w.rank == 0) {
      weft_checkpoint_t ck = nullptr;
      s = weft_checkpoint_open(dir.c_str(), &ck);
      if (s == WEFT_OK) s = weft_checkpoint_verify(ck);
      weft_checkpoint_close(ck);
      if (s != WEFT_OK) {
        mpt::logf("FAIL verify %c: %s: %s", letter, mpt::status_name(s), mpt::last_error().c_str());
        ++wrong;
      }
    }
  }
  weft_comm_destroy(w.comm);
  if (!wrong) mpt::logf("checkpoint %c loads on %d ranks with every value right", letter, w.size);
  return wrong ? 1 : 0;
}

// Runs argv (with `extra_env` added) and returns its exit status (128 + signal when killed).
int run(const std::vector<std::string>& argv, const std::string& extra_env) {
  std::vector<char*> args, env;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (char** e = environ; *e; ++e) env.push_back(*e);
  if (!extra_env.empty()) env.push_back(const_cast<char*>(extra_env.c_str()));
  env.push_back(nullptr);
  std::string line;
  for (const std::string& a : argv) line += a + " ";
  std::printf("[driver] %s%s\n", extra_env.empty() ? "" : (extra_env + " ").c_str(), line.c_str());
  std::fflush(stdout);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), env.data()) != 0) {
    std::printf("[driver] cannot start %s: %s\n", args[0], std::strerror(errno));
    return 127;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int driver(const std::string& weftrun, const std::string& self, int n, int m, int victim, const std::string& point,
           const std::string& dir) {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    std::printf("[driver] %s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    std::fflush(stdout);
    if (!ok) ++failures;
  };
  const std::string N = std::to_string(n), M = std::to_string(m);
  remove_tree(dir);
  expect(run({weftrun, "--timeout", "120", "-n", N, self, "--save", "A", dir}, "") == 0, "save A");
  const std::vector<std::string> a_files = list_files(dir);

  const std::string kill_env = "WEFT_TEST_CHECKPOINT_KILL=" + std::to_string(victim) + ":" + point;
  expect(run({weftrun, "--timeout", "120", "-n", N, self, "--save", "B", dir}, kill_env) != 0,
         "save B with rank " + std::to_string(victim) + " killed at '" + point + "' fails");
  std::vector<std::string> b_left;
  for (const std::string& f : list_files(dir))
    if (std::find(a_files.begin(), a_files.end(), f) == a_files.end()) b_left.push_back(f);
  std::string left;
  for (const std::string& f : b_left) left += " " + f;
  expect(!b_left.empty(), "the killed save left its files (it died mid-save):" + left);
  bool a_intact = true;
  for (const std::string& f : a_files) a_intact &= std::filesystem::exists(dir + "/" + f);
  expect(a_intact, "every file of A is still there");

  expect(run({weftrun, "--timeout", "120", "-n", M, self, "--check", "A", "--saved-on", N, dir}, "") == 0,
         "a fresh load on " + M + " ranks gives A, and A verifies");
  expect(run({weftrun, "--timeout", "120", "-n", N, self, "--save", "C", dir}, "") == 0, "save C");
  expect(run({weftrun, "--timeout", "120", "-n", M, self, "--check", "C", "--saved-on", N, dir}, "") == 0,
         "load C");
  bool b_gone = true;
  for (const std::string& f : b_left) b_gone &= !std::filesystem::exists(dir + "/" + f);
  expect(b_gone, "save C removed what the killed save left");
  if (!failures) remove_tree(dir);
  std::printf("[driver] %s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: weft_mp_checkpoint_kill --driver WEFTRUN -n N -m M --victim R --point data|index DIR\n"
               "       weft_mp_checkpoint_kill --save A|B|C DIR\n"
               "       weft_mp_checkpoint_kill --check A|C [--saved-on N] DIR\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, letter, weftrun, point = "data", dir;
  int n = 3, m = 2, victim = 1, saved_on = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "--driver") mode = "driver", weftrun = next();
    else if (a == "--save" || a == "--check") mode = a.substr(2), letter = next();
    else if (a == "-n") n = std::atoi(next().c_str());
    else if (a == "-m") m = std::atoi(next().c_str());
    else if (a == "--victim") victim = std::atoi(next().c_str());
    else if (a == "--point") point = next();
    else if (a == "--saved-on") saved_on = std::atoi(next().c_str());
    else if (!a.empty() && a[0] != '-' && dir.empty()) dir = a;
    else return usage();
  }
  if (dir.empty() || mode.empty()) return usage();
  if (mode == "driver") {
    char self[4096] = {0};
    if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return usage();
    return driver(weftrun, self, n, m, victim, point, dir);
  }
  if (letter.size() != 1 || letter[0] < 'A' || letter[0] > 'C') return usage();
  if (mode == "save") return save_job(letter[0], dir);
  if (saved_on < 1) saved_on = std::atoi(mpt::env_or("WEFT_WORLD_SIZE", "1").c_str());
  return check_job(letter[0], saved_on, dir);
}
