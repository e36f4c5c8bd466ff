// One rank of the shrink test (started by weft_mp_shrink, not by weftrun):
//   weft_mp_shrink_child <unique id as hex> <rank> <nranks> <timeout_ms> <scenario> <victim> <second>
// scenario "healthy": nobody dies; shrink must act as a dup (same size, same order).
// scenario "kill": rank <victim> posts an allreduce and SIGKILLs itself while it is in flight;
//   the survivors see the error, shrink, check that they all agree on the membership and train
//   on (linear regression, gradients averaged by allreduce) against a one-process reference.
// scenario "second": as "kill", and rank <second> dies during the shrink
//   (WEFT_TEST_SHRINK_EXIT_AT, set by the launcher): every shrink call must return within
//   2 x timeout + 2 s (weft/comm.h says why twice), with a new communicator or an error; a new communicator that still holds a
//   dead rank fails its first operation and is shrunk again (at most 4 rounds).
// Exit 0 = every check passed; 1 = a check failed (the line says which).
// WEFT_TEST_INJECT=1: every check is also run on a corrupted value (the member list with one
// entry changed, a loss with its top exponent bit flipped, see inject.h) and must fail on it;
// prints "INJECT corrupted=N caught=M" and exits 0 only when N == M > 0.
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "inject.h"
#include "mp_common.h"
#include "shrink_training.h"

namespace {

using namespace mpt;

int failures = 0;
long corrupted = 0, caught = 0;

void check_failed(const std::string& what) {
  ++failures;
  logf("CHECK FAILED: %s", what.c_str());
}

// Runs `ok` on the true value, and under WEFT_TEST_INJECT=1 once more on a corrupted one,
// which it must reject.
template <class Check>
void verify(const std::string& what, Check ok) {
  if (!ok(false)) check_failed(what);
  if (inject_enabled()) {
    ++corrupted;
    if (!ok(true)) ++caught;
  }
}

double flip_exponent(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits = injected_bits(WEFT_FLOAT64, bits);
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// The agreement check: every member's original rank, gathered over the new communicator, must
// equal the list of expected survivors on every rank. Returns false when the allgather itself
// failed (a dead member: shrink again).
bool membership_agrees(weft_comm_t comm, int my_orig, const std::vector<int>& expected) {
  int size = 0;
  weft_comm_size(comm, &size);
  std::vector<int32_t> all(static_cast<size_t>(size), -1);
  int32_t mine = my_orig;
  weft_status_t s = weft_allgather(&mine, all.data(), 1, WEFT_INT32, comm, nullptr, nullptr);
  if (s != WEFT_OK) {
    logf("allgather on the shrunk communicator failed (%s: %s): shrink it again", status_name(s), last_error().c_str());
    return false;
  }
  std::string got;
  for (int32_t r : all) got += std::to_string(r) + " ";
  verify("membership after shrink is [" + got + "]", [&](bool corrupt) {
    std::vector<int32_t> seen = all;
    if (corrupt) seen.back() += 1;
    if (seen.size() != expected.size()) return false;
    for (size_t i = 0; i < seen.size(); ++i)
      if (seen[i] != expected[i]) return false;
    return true;
  });
  return true;
}

// Data-parallel training on `comm`, checked step by step against the one-process reference on
// the survivors' data. Tolerance: both sides sum at most 5 * 16 products of values below ~10
// in double precision, in different orders: relative difference < 1e-12; 1e-9 leaves margin.
void train_on(weft_comm_t comm, int my_orig, const std::vector<int>& survivors) {
  const shrink::Shard shard = shrink::make_shard(my_orig);
  const std::vector<double> want = shrink::reference_losses(survivors);
  std::vector<double> w(shrink::kFeatures, 0.0), grad;
  for (int step = 0; step < shrink::kSteps; ++step) {
    double loss = 0;
    shrink::shard_loss_grad(shard, w, &loss, &grad);
    std::vector<double> packed = grad;
    packed.push_back(loss);
    MPT_OK(weft_allreduce(packed.data(), packed.data(), packed.size(), WEFT_FLOAT64, WEFT_AVG, comm, nullptr, nullptr));
    const double got = packed.back();
    verify("step " + std::to_string(step) + " loss " + std::to_string(got) + " vs reference " +
               std::to_string(want[static_cast<size_t>(step)]),
           [&](bool corrupt) {
             const double v = corrupt ? flip_exponent(got) : got;
             const double ref = want[static_cast<size_t>(step)];
             return std::fabs(v - ref) <= 1e-9 * std::fabs(ref);
           });
    for (int f = 0; f < shrink::kFeatures; ++f) w[f] -= shrink::kLearningRate * packed[static_cast<size_t>(f)];
  }
  verify("training reduced the loss", [&](bool corrupt) {
    const double last = corrupt ? flip_exponent(want.back()) : want.back();
    return last < want.front() / 10;
  });
  logf("trained %d steps on %zu ranks; final loss %.6g", shrink::kSteps, survivors.size(), want.back());
}

// Runs allreduces until one fails; the victim posts one and kills itself while it is in flight.
void run_until_failure(weft_comm_t comm, int rank, int n, int victim) {
  std::vector<float> buf(1 << 14);
  for (long iter = 0; iter < 100000; ++iter) {
    for (float& f : buf) f = static_cast<float>(rank + 1);
    if (rank == victim && iter == 5) {
      weft_request_t req = nullptr;
      MPT_OK(weft_allreduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, comm, nullptr, &req));
      logf("raising SIGKILL with an allreduce in flight");
      raise(SIGKILL);
    }
    weft_status_t s = weft_allreduce(buf.data(), buf.data(), buf.size(), WEFT_FLOAT32, WEFT_SUM, comm, nullptr, nullptr);
    if (s != WEFT_OK) {
      logf("allreduce %ld failed as expected: %s: %s", iter, status_name(s), last_error().c_str());
      return;
    }
    if (buf[0] != static_cast<float>(n * (n + 1) / 2)) die("allreduce %ld: wrong sum %g", iter, static_cast<double>(buf[0]));
  }
  die("no allreduce failed although rank %d was to die", victim);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s <id-hex> <rank> <nranks> <timeout_ms> <healthy|kill|second> <victim> <second>\n",
                 argv[0]);
    return 2;
  }
  const std::string hex = argv[1], scenario = argv[5];
  const int rank = std::atoi(argv[2]), n = std::atoi(argv[3]);
  const int victim = std::atoi(argv[6]), second = std::atoi(argv[7]);
  set_log_rank(rank, n);
  weft_unique_id_t id = unique_id_from_hex(hex);
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = std::atoll(argv[4]);
  cfg.name = "shrink-test";
  weft_comm_t comm = nullptr;
  MPT_OK(weft_comm_init(&comm, &id, rank, n, &cfg));

  std::vector<int> expected;
  for (int r = 0; r < n; ++r)
    if (scenario == "healthy" || (r != victim && r != second)) expected.push_back(r);
  if (scenario != "healthy") run_until_failure(comm, rank, n, victim);

  // Shrink until the new communicator works (a rank that died during a shrink may still be in
  // the result; its first operation then fails everywhere and the survivors shrink again).
  std::vector<weft_comm_t> comms{comm};
  weft_comm_t current = comm, shrunk = nullptr;
  for (int round = 0; round < 4 && !shrunk; ++round) {
    weft_comm_t next = nullptr;
    const double t0 = now_s();
    weft_status_t s = weft_comm_shrink(current, &next);
    const double dt = now_s() - t0;
    logf("shrink round %d: %s in %.2f s%s%s", round, status_name(s), dt, s == WEFT_OK ? "" : ": ",
         s == WEFT_OK ? "" : last_error().c_str());
    if (dt > 2.0 * static_cast<double>(cfg.timeout_ms) / 1000.0 + 2.0) check_failed("shrink took longer than 2 x timeout + 2 s");
    if (s != WEFT_OK) {
      if (scenario != "second") check_failed("shrink failed without a second death");
      else if (!mentions_rank(last_error(), second) && !mentions_rank(last_error(), victim))
        check_failed("shrink error names neither dead rank");
      continue;  // shrink the same communicator again
    }
    comms.push_back(next);
    if (membership_agrees(next, rank, expected)) shrunk = next;
    else current = next;
  }
  if (!shrunk) {
    check_failed("no working communicator after 4 shrink rounds");
  } else {
    int r = -1, sz = -1;
    weft_comm_rank(shrunk, &r);
    weft_comm_size(shrunk, &sz);
    if (scenario == "healthy") {
      // Equal to a dup: same size, same rank, and a dup of the old one agrees.
      weft_comm_t dup = nullptr;
      MPT_OK(weft_comm_dup(comm, &dup));
      int dr = -1, ds = -1;
      weft_comm_rank(dup, &dr);
      weft_comm_size(dup, &ds);
      verify("healthy shrink == dup", [&](bool corrupt) { return r == dr && sz + (corrupt ? 1 : 0) == ds && ds == n; });
      weft_comm_destroy(dup);
    }
    train_on(shrunk, rank, expected);
  }
  for (auto it = comms.rbegin(); it != comms.rend(); ++it) weft_comm_destroy(*it);
  if (inject_enabled()) {
    std::printf("INJECT rank=%d corrupted=%ld caught=%ld\n", rank, corrupted, caught);
    std::fflush(stdout);
    if (corrupted == 0 || caught != corrupted) return 1;
  }
  logf("%s", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
